#!/usr/bin/env bash
# The ACP agent under the official TypeScript SDK (@agentclientprotocol/sdk):
# tests/acp/*.test.mjs drive the real bin/metis acp over stdio.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x bin/metis ] || go build -o bin/metis ./cmd/metis
node --test tests/acp/
