#!/usr/bin/env bash
# Set-up: fetch the Go modules and the Node packages (the dashboard's
# build and the Node test suites), install Debian's chromium (browser
# tests) and tmux (the TUI's end-to-end test) when they are missing and we
# can, and build bin/metis. Needs Go 1.26 (go.mod), Node 20 with npm, and
# the Go module proxy and npm registry. The dashboard's built bundle is
# committed, so building metis alone needs neither Node nor this script.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "setup: Go is not installed (https://go.dev/dl/)" >&2; exit 1; }
# Every module in go.mod's graph, the tool directive's staticcheck too, so
# that `go tool staticcheck` in scripts/test.sh needs no network.
go mod download

if command -v npm >/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "setup: npm is missing; the dashboard and Node tests cannot run" >&2
fi

# Debian packages the tests drive: tmux (TUI), chromium (dashboard).
missing=()
command -v tmux >/dev/null || missing+=(tmux)
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]} with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >/dev/null 2>&1 \
      || echo "setup: could not install ${missing[*]}; the tests that need them will be skipped" >&2
  else
    echo "setup: ${missing[*]} missing; the tests that need them will be skipped" >&2
  fi
fi

mkdir -p bin
CGO_ENABLED=0 go build -o bin/metis ./cmd/metis
echo "setup: built bin/metis"
