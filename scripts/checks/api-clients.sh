#!/usr/bin/env bash
# The API contract from a client's side, against one sim node on loopback:
#   1. the served OpenAPI document is valid OpenAPI 3.1 (openapi-spec-validator);
#   2. a client generated from it (openapi-python-client) runs the README's tour;
#   3. OpenWA's Python SDK (pinned) works as a drop-in (wire-notes §12);
#   4. a bounded schemathesis run (fixed seed, ~2 minutes) finds no 5xx and no response off its schema.
# Set API_CHECKS=validate,generated,sdk,fuzz to run a subset; FUZZ_SECONDS to change the fuzz budget.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$here/../lib.sh"
ensure_venv
: "${WAGATE_BIN:?WAGATE_BIN must name the wagate binary}"
checks="${API_CHECKS:-validate,generated,sdk,fuzz}"

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
key="check-admin-key-0123456789abcdef0123456789"
node_pid=""
cleanup() {
  if [ -n "$node_pid" ]; then kill "$node_pid" 2>/dev/null || true; wait "$node_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

env -i PATH="$PATH" API_PORT="$port" BIND_HOST=127.0.0.1 DATA_DIR="$work/data" API_MASTER_KEY="$key" \
  ENGINE_TYPE=sim NODE_ENV=test LOG_LEVEL=warn WEBHOOK_SSRF_PROTECT=false MEDIA_URL_GUARD=false \
  RATE_LIMIT_SHORT_LIMIT=1000000 RATE_LIMIT_MEDIUM_LIMIT=1000000 RATE_LIMIT_LONG_LIMIT=1000000 \
  "$WAGATE_BIN" >"$work/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 1 600); do
  listening "$port" && break
  kill -0 "$node_pid" 2>/dev/null || { cat "$work/node.log"; echo "api-clients: node exited" >&2; exit 1; }
  sleep 0.1
done

export WAGATE_URL="http://127.0.0.1:$port" WAGATE_KEY="$key" CHECK_WORK="$work"
status=0
run() {
  local name="$1"; shift
  case ",$checks," in *",$name,"*) ;; *) return 0 ;; esac
  echo "api-clients: $name"
  if ! "$@"; then echo "api-clients: $name FAILED" >&2; status=1; fi
}
run validate "$VENV/bin/python" "$here/py/validate_spec.py"
run generated "$here/py/generated_client.sh"
run sdk "$VENV/bin/python" "$here/py/openwa_sdk.py"
run fuzz "$VENV/bin/python" "$here/py/fuzz.py"
if [ "$status" != 0 ]; then tail -n 50 "$work/node.log" >&2; fi
exit "$status"
