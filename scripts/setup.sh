#!/usr/bin/env bash
# Set-up: fetch the Go modules, install tmux (for the TUI's end-to-end
# test) when it is missing and we can, and build bin/metis. Needs Go 1.26
# (go.mod) and the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "setup: Go is not installed (https://go.dev/dl/)" >&2; exit 1; }
go mod download
if ! command -v tmux >/dev/null; then
  # the TUI end-to-end test drives the real program in tmux
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1 || echo "setup: could not install tmux; the TUI end-to-end test will be skipped" >&2
  else
    echo "setup: tmux is missing; the TUI end-to-end test will be skipped" >&2
  fi
fi
mkdir -p bin
go build -o bin/metis ./cmd/metis
echo "setup: built bin/metis"
