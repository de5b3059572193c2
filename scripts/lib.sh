# Shared helpers for scripts/test.sh and scripts/checks/*.sh (sourced, not run).
# Everything here binds or talks to loopback only.

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
_apt_updated=""
# install_pkgs PKG...: installs Debian packages quietly, updating the index once per run.
install_pkgs() {
  [ -n "$_apt_updated" ] || { as_root apt-get update -qq; _apt_updated=1; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ensure_venv: a throwaway Python virtual environment for the client, fuzz and deployment checks, made from
# scripts/checks/requirements.txt and rebuilt whenever that file changes. Prints nothing; sets $VENV.
ensure_venv() {
  local req stamp
  req="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/checks/requirements.txt"
  VENV="${WAGATE_VENV:-$HOME/.cache/wagate-venv}"
  stamp="$(sha256sum "$req" | cut -c1-16)"
  if [ ! -f "$VENV/.stamp" ] || [ "$(cat "$VENV/.stamp")" != "$stamp" ]; then
    rm -rf "$VENV"
    command -v python3 >/dev/null || install_pkgs python3 python3-venv
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$req"
    echo "$stamp" > "$VENV/.stamp"
  fi
  export VENV
}

# ensure_s3_venv: the loopback S3 server of the media storage tests (moto in server mode), in its own small
# virtual environment made from scripts/checks/s3-requirements.txt and rebuilt whenever that file changes.
# Prints nothing; sets $S3_VENV. The storage tests call it themselves when the venv is missing.
ensure_s3_venv() {
  local req stamp
  req="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/checks/s3-requirements.txt"
  S3_VENV="${WAGATE_S3_VENV:-$HOME/.cache/wagate-s3-venv}"
  stamp="$(sha256sum "$req" | cut -c1-16)"
  if [ ! -f "$S3_VENV/.stamp" ] || [ "$(cat "$S3_VENV/.stamp")" != "$stamp" ]; then
    rm -rf "$S3_VENV"
    python3 -c 'import ensurepip' 2>/dev/null || install_pkgs python3 python3-venv
    python3 -m venv "$S3_VENV"
    "$S3_VENV/bin/pip" install -q --disable-pip-version-check -r "$req"
    echo "$stamp" > "$S3_VENV/.stamp"
  fi
  export S3_VENV
}

# ensure_wajs: the browser engine's pinned WhatsApp Web injector (@wppconnect/wa-js, node/engine-browser/js),
# installed with npm when missing or when its lock file changed.
ensure_wajs() {
  local dir stamp
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/node/engine-browser/js"
  stamp="$(sha256sum "$dir/package-lock.json" | cut -c1-16)"
  if [ "$(cat "$dir/node_modules/.wagate-stamp" 2>/dev/null)" != "$stamp" ]; then
    command -v npm >/dev/null || install_pkgs npm
    (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --silent)
    echo "$stamp" > "$dir/node_modules/.wagate-stamp"
  fi
}

# run_node_suites_again: runs the wagate-node test binaries that `cargo test --workspace` built, from node/
# as cargo runs them, without asking cargo to build them again: `cargo test -p wagate-node` resolves another
# feature set than the workspace and would rebuild most dependencies. Fails if any binary fails, after all ran.
run_node_suites_again() {
  local root failed=0 bin
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  command -v python3 >/dev/null || install_pkgs python3
  mapfile -t bins < <(cd "$root" && cargo test --workspace --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m.get("profile", {}).get("test")
            and m.get("manifest_path", "").endswith("/node/Cargo.toml")):
        print(m["executable"])
')
  [ "${#bins[@]}" -gt 0 ] || { echo "run_node_suites_again: no wagate-node test binaries found" >&2; return 1; }
  for bin in "${bins[@]}"; do
    echo "     Running $(basename "$bin") again"
    (cd "$root/node" && "$bin") || failed=1
  done
  return "$failed"
}
