#!/usr/bin/env bash
# The test command: gofmt check, go vet, staticcheck (the version pinned by
# go.mod's tool directive), the whole Go suite under the race
# detector, then the Node suites (scripts/test.d/*.sh, in name order: the
# TypeScript client's conformance run, the dashboard in a real browser,
# the ACP agent under the official TypeScript SDK). Run ./scripts/setup.sh
# once first: it installs the Node packages and chromium.
#
# Every step runs even when an earlier one failed: the summary at the end
# lists each step with its result and time, and the command exits 1 when
# any failed (a Node suite that could not run because bin/metis did not
# build counts as failed).
set -uo pipefail
cd "$(dirname "$0")/.."

results=()
failed=()

# step NAME COMMAND...: run a step, remember its outcome and duration.
step() {
  local name=$1
  shift
  echo "== $name"
  local start=$SECONDS rc=0
  "$@" || rc=$?
  local took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    results+=("ok    ${took}s  $name")
  else
    results+=("FAIL  ${took}s  $name (exit $rc)")
    failed+=("$name")
  fi
  return 0
}

gofmt_check() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
  if [ -n "$unformatted" ]; then
    echo "gofmt needed on:" $unformatted >&2
    return 1
  fi
}

step gofmt gofmt_check
step "go vet" go vet ./...
step staticcheck go tool staticcheck ./...
# The per-package timeout leaves room for a loaded machine: the cluster
# package starts real server processes and NATS servers for each of its
# tests, about 8 minutes on a quiet 2-core machine, and twice that and
# more when other work competes for the cores.
step "go test" go test -race -count=1 -timeout 35m ./...

# The Node suites drive the real binary.
mkdir -p bin
rm -f bin/metis # never run the suites against a stale binary
built=1
step "build bin/metis" env CGO_ENABLED=0 go build -o bin/metis ./cmd/metis
if [ ! -x bin/metis ]; then
  built=0
fi
for suite in scripts/test.d/*.sh; do
  [ -e "$suite" ] || continue
  if [ "$built" -eq 0 ]; then
    results+=("SKIP  0s  $suite (no bin/metis)")
    failed+=("$suite")
    continue
  fi
  step "$suite" bash "$suite"
done

echo
echo "== summary (${SECONDS}s)"
printf '%s\n' "${results[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'failed:' >&2
  printf ' [%s]' "${failed[@]}" >&2
  echo >&2
  exit 1
fi
echo "all passed"
