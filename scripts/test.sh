#!/usr/bin/env bash
# The test command: gofmt check, go vet, staticcheck (the version pinned by
# go.mod's tool directive), the whole Go suite under the race
# detector, then the Node suites (scripts/test.d/*.sh, in name order: the
# TypeScript client's conformance run, the dashboard in a real browser,
# the ACP agent under the official TypeScript SDK). Run ./scripts/setup.sh
# once first: it installs the Node packages and chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" $unformatted >&2
  exit 1
fi
go vet ./...
go tool staticcheck ./...
go test -race -count=1 -timeout 20m ./...

# The Node suites drive the real binary.
mkdir -p bin
CGO_ENABLED=0 go build -o bin/metis ./cmd/metis
for suite in scripts/test.d/*.sh; do
  [ -e "$suite" ] || continue
  echo "== $suite"
  bash "$suite"
done
