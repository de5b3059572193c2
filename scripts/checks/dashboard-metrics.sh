#!/usr/bin/env bash
# The Grafana dashboard and the PrometheusRule alerts name only metrics the code exports: starts a real
# `wagate` on the sim engine (loopback), drives a little traffic, scrapes /api/metrics with the token and
# lists every queried metric that is missing (histogram _bucket/_sum/_count resolve to their family).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_venv
"$VENV/bin/python" scripts/checks/deploy_check.py metrics
