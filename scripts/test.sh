#!/usr/bin/env bash
# Runs the whole wagate test suite. Brings up PostgreSQL (127.0.0.1:5432, trust auth) and Redis
# (127.0.0.1:6379) on loopback when they are not already running, installing them from Debian's packages
# when missing. The build directory lives outside the clone so repeated runs build incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/wagate-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_postgres() {
  listening 5432 && return 0
  echo "test.sh: starting PostgreSQL on 127.0.0.1:5432"
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then install_pkgs postgresql postgresql-client; fi
  if ls /etc/postgresql/*/main >/dev/null 2>&1 && command -v pg_ctlcluster >/dev/null; then
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    sleep 1; listening 5432 && psql -h 127.0.0.1 -U postgres -d postgres -c 'SELECT 1' >/dev/null 2>&1 && return 0
  fi
  # An ephemeral trust-auth cluster owned by the postgres user.
  local bin dir=/tmp/wagate-pg
  bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | tail -n1)")
  as_root rm -rf "$dir"; as_root mkdir -p "$dir"; as_root chown postgres "$dir" 2>/dev/null || true
  as_root runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
  as_root runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -o "-p 5432 -k /tmp -c listen_addresses=127.0.0.1" -l "$dir/log" -w start >/dev/null
}

ensure_redis() {
  listening 6379 && return 0
  echo "test.sh: starting Redis on 127.0.0.1:6379"
  command -v redis-server >/dev/null || install_pkgs redis-server
  redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null
  for _ in $(seq 1 50); do listening 6379 && return 0; sleep 0.1; done
  echo "test.sh: Redis did not start" >&2; return 1
}

command -v psql >/dev/null || install_pkgs postgresql-client
ensure_postgres
ensure_redis
# Media conversion tests drive the system ffmpeg and check results with ffprobe (both in Debian's ffmpeg).
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || install_pkgs ffmpeg
# Media storage tests run every case on local files and on a real S3-compatible server on loopback (moto).
ensure_s3_venv
# The browser engine's tests drive Debian's Chromium (never a downloaded one); the node loads wa-js from npm.
[ -x /usr/lib/chromium/chromium ] || install_pkgs chromium
ensure_wajs

if [ "${WAGATE_SKIP_LINT:-}" != "1" ]; then
  cargo fmt --all -- --check
  cargo clippy --workspace --all-targets -- -D warnings
fi
# The node suites start the worker this build makes (a `cargo build -p wagate-workers` of their own would
# resolve another feature set and rebuild most dependencies).
export WAGATE_TEST_WORKER="$CARGO_TARGET_DIR/debug/wagate-worker"
cargo test --workspace --no-fail-fast "$@"
# The same node suites again with every node on its own throwaway PostgreSQL data DB (the binaries just
# built, run again as they are).
WAGATE_TEST_DATABASE=postgres run_node_suites_again

# Checks that drive the built binaries from outside (clients, fuzzing, deployment files): scripts/checks/.
export WAGATE_BIN="$CARGO_TARGET_DIR/debug/wagate" WAGATE_WORKER_BIN="$CARGO_TARGET_DIR/debug/wagate-worker"
for check in scripts/checks/*.sh; do
  [ -x "$check" ] || continue
  echo "test.sh: $check"
  "$check"
done
