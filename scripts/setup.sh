#!/usr/bin/env bash
# Set-up: fetch the Go modules and build the metis binary into ./bin.
# Needs Go (see go.mod for the version; the toolchain line lets the go
# command fetch a newer one through the module proxy if required).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "setup: Go is not installed (https://go.dev/dl/)" >&2; exit 1; }
go mod download
mkdir -p bin
go build -o bin/metis ./cmd/metis
echo "setup: built bin/metis"
