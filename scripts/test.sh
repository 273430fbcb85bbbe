#!/usr/bin/env bash
# The test command: vet, gofmt check, and the whole suite under the race
# detector.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" $unformatted >&2
  exit 1
fi
go vet ./...
go test -race -count=1 -timeout 20m ./...
