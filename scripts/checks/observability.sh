#!/usr/bin/env bash
# Observability from outside, on loopback: a node (ROLE=api) and a separate wagate-worker are scraped; every
# metric family of the contract must be there with HELP and TYPE (Prometheus' own text parser, then
# `promtool check metrics`); a webhook delivered by the worker shows in the worker's scrape; the node's access
# log line is read from its captured stdout; readiness flips to 503 while a Redis of this check's own (not the
# shared one on 6379) is stopped, and during a drain.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

WAGATE_BIN="${WAGATE_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/wagate-target}/debug/wagate}"
WAGATE_WORKER_BIN="${WAGATE_WORKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/wagate-target}/debug/wagate-worker}"

# promtool without the Prometheus server: the binary alone, extracted from Debian's package.
ensure_promtool() {
  PROMTOOL="$(command -v promtool || true)"
  [ -n "$PROMTOOL" ] && return 0
  local dir="$HOME/.cache/wagate-promtool"
  if [ ! -x "$dir/usr/bin/promtool" ]; then
    local dl; dl="$(mktemp -d)"
    as_root apt-get update -qq
    (cd "$dl" && apt-get download -qq prometheus >/dev/null)
    mkdir -p "$dir"
    dpkg-deb -x "$dl"/prometheus_*.deb "$dir"
    rm -rf "$dl"
  fi
  PROMTOOL="$dir/usr/bin/promtool"
}

ensure_promtool
ensure_venv
command -v redis-server >/dev/null || install_pkgs redis-server
command -v psql >/dev/null || install_pkgs postgresql-client
export PROMTOOL WAGATE_BIN WAGATE_WORKER_BIN
exec "$VENV/bin/python" scripts/checks/observability/check_telemetry.py
