#!/usr/bin/env bash
# The TypeScript client (web/src/client): type-check the web tree in
# strict mode, then bundle the client's tests with esbuild and run them
# under node --test: the streaming conformance suite on the same traces
# as the Go runner, a differential test against the Go reducer on
# damaged copies of those traces, the reducer's property tests, and the
# Follower against a real bin/metis on loopback.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x bin/metis ] || { echo "20-web-client: bin/metis is missing (scripts/test.sh builds it)" >&2; exit 1; }
node_modules/.bin/tsc --noEmit -p web
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Damaged traces and the Go View's state for each, for differential.test.ts.
go test -count=1 ./tests/streaming-conformance/ -run '^TestMutants$' -mutants "$out/mutants" >/dev/null
node_modules/.bin/esbuild web/test/client/*.test.ts --bundle --platform=node --format=esm --target=node20 \
  --outdir="$out/tests" --out-extension:.js=.mjs --log-level=warning
METIS_MUTANTS="$out/mutants" METIS_REPO="$PWD" METIS_BIN="$PWD/bin/metis" node --experimental-websocket --no-warnings=ExperimentalWarning \
  --test --test-concurrency=1 "$out"/tests/*.test.mjs
