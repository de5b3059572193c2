#!/usr/bin/env bash
# Generates a Python client from the served OpenAPI document with openapi-python-client and runs the
# README's tour with it. Any generator warning (an operation it had to skip) fails the check.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$CHECK_WORK/generated"
rm -rf "$out" && mkdir -p "$out"
"$VENV/bin/python" -c "
import json, sys
sys.path.insert(0, '$here')
from common import served_document
json.dump(served_document(), open('$out/openapi.json', 'w'))
"
# ruff (a dependency of the generator) formats the output; it lives in the venv's bin.
PATH="$VENV/bin:$PATH" "$VENV/bin/openapi-python-client" generate --path "$out/openapi.json" --meta none \
  --output-path "$out/wagate_client" >"$out/generate.log" 2>&1 || { cat "$out/generate.log"; exit 1; }
if grep -qiE "warning|error|will not be generated" "$out/generate.log"; then
  cat "$out/generate.log"; echo "openapi-python-client could not generate every operation" >&2; exit 1
fi
PYTHONPATH="$out:$here" "$VENV/bin/python" "$here/generated_tour.py"
