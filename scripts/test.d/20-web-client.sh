#!/usr/bin/env bash
# The TypeScript client (web/src/client): type-check the web tree in
# strict mode, then bundle the client's tests with esbuild and run them
# under node --test: the streaming conformance suite on the same traces
# as the Go runner, the reducer's property tests, and the Follower
# against a real bin/metis on loopback.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x bin/metis ] || { echo "20-web-client: bin/metis is missing (scripts/test.sh builds it)" >&2; exit 1; }
node_modules/.bin/tsc --noEmit -p web
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
node_modules/.bin/esbuild web/test/client/*.test.ts --bundle --platform=node --format=esm --target=node20 \
  --outdir="$out" --out-extension:.js=.mjs --log-level=warning
METIS_REPO="$PWD" METIS_BIN="$PWD/bin/metis" node --experimental-websocket --no-warnings=ExperimentalWarning \
  --test --test-concurrency=1 "$out"/*.test.mjs
