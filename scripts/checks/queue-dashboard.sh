#!/usr/bin/env bash
# The queue dashboard in a real headless Chromium (Debian's `chromium`, installed when missing): it loads with
# no console error and nothing fetched outside loopback, shows a failed delivery, and a Retry click delivers
# it. Saves a screenshot to $CARGO_TARGET_DIR/wagate-checks/queue-dashboard.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

WAGATE_BIN="${WAGATE_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/wagate-target}/debug/wagate}"
[ -x /usr/lib/chromium/chromium ] || install_pkgs chromium
ensure_venv
export WAGATE_BIN CHROMIUM=/usr/lib/chromium/chromium
export SCREENSHOT_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/wagate-target}/wagate-checks"
exec "$VENV/bin/python" scripts/checks/observability/check_dashboard.py
