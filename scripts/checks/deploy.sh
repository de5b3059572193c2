#!/usr/bin/env bash
# Deployment files, offline: hadolint on the Dockerfile; yamllint on the chart values and k8s/ manifests;
# the Helm chart rendered and linted with real Helm (helm-python-sdk) for the default, cluster and dev values
# files, every rendered object and every k8s/ overlay (`kubectl kustomize`) validated against the Kubernetes
# JSON schemas (kubernetes-validate). No cluster, registry or network beyond package installs.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_venv
command -v kubectl >/dev/null || install_pkgs kubectl

"$VENV/bin/hadolint" Dockerfile
echo "deploy: hadolint Dockerfile clean"

yaml_files=(helm/wagate/Chart.yaml helm/wagate/values.yaml helm/wagate/ci/*.yaml)
while IFS= read -r f; do yaml_files+=("$f"); done < <(find k8s -name '*.yaml' | sort)
"$VENV/bin/yamllint" -s -c scripts/checks/yamllint.yaml "${yaml_files[@]}"
# The rendered manifests and the kustomize builds must be clean YAML too.
rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
"$VENV/bin/python" - "$rendered" <<'PY'
import sys, yaml, helm_python
out = sys.argv[1]
for name, values in (("default", {}), ("cluster", yaml.safe_load(open("helm/wagate/ci/cluster-values.yaml")))):
    docs = helm_python.Chart.load("helm/wagate").render(values, name="wagate", namespace="wagate")
    text = "\n".join("---\n" + v.strip() + "\n" for k, v in sorted(docs.items()) if not k.endswith("NOTES.txt") and v.strip())
    open(f"{out}/{name}.yaml", "w").write(text)
PY
kubectl kustomize k8s/base > "$rendered/k8s-base.yaml"
kubectl kustomize k8s/overlays/dev > "$rendered/k8s-dev.yaml"
"$VENV/bin/yamllint" -s -d '{extends: relaxed, rules: {line-length: disable, indentation: {indent-sequences: whatever}}}' "$rendered"/*.yaml
echo "deploy: yamllint clean (${#yaml_files[@]} files, rendered chart and kustomize builds)"

"$VENV/bin/python" scripts/checks/deploy_check.py chart
"$VENV/bin/python" scripts/checks/deploy_check.py kustomize
