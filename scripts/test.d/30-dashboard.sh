#!/usr/bin/env bash
# The dashboard suite: the committed bundle (web/dist) must be what
# web/build.mjs builds from the sources now, then the browser tests drive
# the real binary (bin/metis) with Debian's chromium under node --test.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node web/build.mjs --outdir "$tmp/dist"
if ! diff -r web/dist "$tmp/dist" >/dev/null; then
  echo "web/dist is stale: run 'node web/build.mjs' and commit web/dist" >&2
  diff -r web/dist "$tmp/dist" | head -20 >&2 || true
  exit 1
fi
node_modules/.bin/tsc -p web/tsconfig.json
export METIS_BIN="${METIS_BIN:-$PWD/bin/metis}"
node --experimental-websocket --no-warnings --test --test-concurrency=1 web/test/browser/*.test.mjs
