"""Offline checks of the deployment files (run by scripts/checks/deploy.sh and dashboard-metrics.sh).

  deploy_check.py chart      render helm/wagate with Helm (helm-python-sdk) for each values file, lint it,
                             prove the values schema rejects wrong types, and validate every rendered object
                             against the Kubernetes JSON schemas (kubernetes-validate)
  deploy_check.py kustomize  validate every k8s/ overlay built by `kubectl kustomize`
  deploy_check.py metrics    compare the metric names the dashboard and the alerts query with the families a
                             live `wagate` (sim engine) exposes at /api/metrics
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import helm_python
import kubernetes_validate
import yaml

helm_python.disable_logging()

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "helm", "wagate")
K8S_VERSION = "1.32.0"
# (values file or None for the defaults, release name, namespace)
VALUES_FILES = [
    (None, "wagate", "default"),
    (os.path.join(CHART, "ci", "cluster-values.yaml"), "prod", "wagate"),
    (os.path.join(CHART, "ci", "dev-values.yaml"), "dev", "wagate-dev"),
]
OVERLAYS = [os.path.join(ROOT, "k8s", "base"), os.path.join(ROOT, "k8s", "overlays", "dev")]
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL: {message}")


def documents(text):
    return [d for d in yaml.safe_load_all(text) if d]


def validate_object(obj, where):
    kind = obj.get("kind", "?")
    name = obj.get("metadata", {}).get("name", "?")
    if kind in CRD_KINDS:
        for problem in check_crd(obj):
            fail(f"{where}: {kind}/{name}: {problem}")
        return
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        path = "/".join(str(p) for p in err.path)
        fail(f"{where}: {kind}/{name}: {err.message} at {path or '(root)'}")
    except kubernetes_validate.SchemaNotFoundError as err:
        fail(f"{where}: {kind}/{name}: no schema ({err})")


DURATION = re.compile(r"^[0-9]+(ms|s|m|h|d|w|y)$")


def check_crd(obj):
    """A minimal structural check of the Prometheus Operator objects (their CRD schemas are not bundled)."""
    spec = obj.get("spec") or {}
    problems = []
    if obj.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.append(f"apiVersion {obj.get('apiVersion')} is not monitoring.coreos.com/v1")
    if obj["kind"] == "ServiceMonitor":
        if not (spec.get("selector") or {}).get("matchLabels"):
            problems.append("spec.selector.matchLabels is empty")
        endpoints = spec.get("endpoints") or []
        if not endpoints:
            problems.append("no endpoints")
        for e in endpoints:
            if not e.get("port") or not str(e.get("path", "")).startswith("/"):
                problems.append(f"endpoint needs a port name and an absolute path: {e}")
            if not DURATION.match(str(e.get("interval", "30s"))):
                problems.append(f"bad interval {e.get('interval')}")
            creds = (e.get("authorization") or {}).get("credentials") or {}
            if not creds.get("name") or creds.get("key") != "METRICS_TOKEN":
                problems.append("endpoint does not send the METRICS_TOKEN bearer")
    else:
        groups = spec.get("groups") or []
        if not groups:
            problems.append("no rule groups")
        for g in groups:
            for r in g.get("rules") or []:
                if not r.get("alert") or not str(r.get("expr", "")).strip():
                    problems.append(f"rule without alert name or expr: {r}")
                if "for" in r and not DURATION.match(str(r["for"])):
                    problems.append(f"{r.get('alert')}: bad for {r['for']}")
                if str(r.get("expr", "")).count("(") != str(r.get("expr", "")).count(")"):
                    problems.append(f"{r.get('alert')}: unbalanced parentheses")
    return problems


def render(values_file, name, namespace):
    values = yaml.safe_load(open(values_file)) if values_file else {}
    return helm_python.Chart.load(CHART).render(values, name=name, namespace=namespace)


def check_chart():
    for values_file, name, namespace in VALUES_FILES:
        label = os.path.relpath(values_file, ROOT) if values_file else "default values"
        values = yaml.safe_load(open(values_file)) if values_file else {}
        lint = helm_python.lint(CHART, values, strict=True)
        for message in lint.get("messages") or []:
            fail(f"helm lint ({label}): {message}")
        for error in lint.get("errors") or []:
            fail(f"helm lint ({label}): {error}")
        try:
            rendered = render(values_file, name, namespace)
        except helm_python.HelmError as err:
            fail(f"helm template ({label}): {err}")
            continue
        objects = []
        for template, text in sorted(rendered.items()):
            if template.endswith("NOTES.txt"):
                continue
            for obj in documents(text):
                objects.append(obj)
                validate_object(obj, f"{label}: {template}")
        kinds = sorted({o["kind"] for o in objects})
        print(f"chart ({label}): {len(objects)} objects validated against Kubernetes {K8S_VERSION}: {', '.join(kinds)}")
        check_chart_wiring(label, objects)
    check_schema_rejects()
    check_global_gauges(dashboard_queries() + alert_queries())


def check_chart_wiring(label, objects):
    """What the schema cannot see: the grace period covers the drain, probes and security are in place."""
    for obj in objects:
        if obj["kind"] not in ("StatefulSet", "Deployment") or "dev-" in obj["metadata"]["name"]:
            continue
        pod = obj["spec"]["template"]["spec"]
        where = f"{label}: {obj['kind']}/{obj['metadata']['name']}"
        security = pod.get("securityContext") or {}
        if not security.get("runAsNonRoot"):
            fail(f"{where}: pod does not run as non-root")
        for c in pod["containers"]:
            if not (c.get("securityContext") or {}).get("readOnlyRootFilesystem"):
                fail(f"{where}: {c['name']} has a writable root filesystem")
            if "livenessProbe" not in c:
                fail(f"{where}: {c['name']} has no liveness probe")
            if not (c.get("resources") or {}).get("requests"):
                fail(f"{where}: {c['name']} has no resource requests")
        if obj["kind"] == "StatefulSet":
            c = pod["containers"][0]
            env = {e["name"]: e for e in c.get("env", [])}
            if c["readinessProbe"]["httpGet"]["path"] != "/api/health/ready":
                fail(f"{where}: readiness is not /api/health/ready")
            if c["livenessProbe"]["httpGet"]["path"] != "/api/health/live":
                fail(f"{where}: liveness is not /api/health/live")
            for var in ("NODE_ID", "NODE_URL", "ROLE", "DATA_DIR"):
                if var not in env:
                    fail(f"{where}: {var} is not set")
            if pod.get("terminationGracePeriodSeconds", 30) <= 30:
                fail(f"{where}: terminationGracePeriodSeconds does not exceed the 30 s drain")
    dashboards = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    for d in dashboards:
        for key, text in d["data"].items():
            json.loads(text)


# Gauges of the shared tables (or of the cluster as a whole) that every pod reports alike: summing them over
# pods multiplies them by the pod count, so a query takes one pod's figure with max first.
GLOBAL_GAUGES = ("wagate_queue_jobs", "wagate_outbox_rows", "wagate_sessions_unowned")
MAX_BEFORE = re.compile(r"\bmax\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(\s*$")


def global_gauge_problems(expr):
    """Each selector of a global gauge must sit directly inside a max aggregation."""
    problems = []
    for name in GLOBAL_GAUGES:
        for m in re.finditer(rf"\b{name}\b", expr):
            if not MAX_BEFORE.search(expr[: m.start()]):
                problems.append(f"{name} is not aggregated with max first (every pod reports the global count)")
    return problems


def check_global_gauges(queries):
    for where, expr in queries:
        for problem in global_gauge_problems(expr):
            fail(f"{where}: {problem}")
    print(f"chart: {len(queries)} dashboard and alert queries take one pod's figure of the global gauges")


def check_schema_rejects():
    """values.schema.json must turn a wrong type into an error, not a rendered release."""
    for bad in ({"api": {"replicas": "three"}}, {"config": {"LOG_LEVEL": 5}}, {"worker": {"autoscaling": {"enabled": "yes"}}},
                {"metrics": {"serviceMonitor": {"enabled": 1}}}, {"secrets": {"apiMasterKey": "short"}}):
        lint = helm_python.lint(CHART, bad)
        if not lint.get("errors"):
            fail(f"values schema accepted {bad}")
        try:
            helm_python.Chart.load(CHART).render(bad, name="bad", namespace="default")
            fail(f"helm template rendered {bad}")
        except helm_python.HelmError:
            pass
    try:
        helm_python.Chart.load(CHART).render({"api": {"replicas": 3}}, name="bad", namespace="default")
        fail("3 API replicas without cluster.enabled rendered")
    except helm_python.HelmError:
        pass
    print("chart: the values schema rejects wrong types; impossible combinations refuse to render")


def check_kustomize():
    for overlay in OVERLAYS:
        label = os.path.relpath(overlay, ROOT)
        built = subprocess.run(["kubectl", "kustomize", overlay], capture_output=True, text=True)
        if built.returncode != 0:
            fail(f"kubectl kustomize {label}: {built.stderr.strip()}")
            continue
        objects = documents(built.stdout)
        for obj in objects:
            validate_object(obj, label)
        print(f"kustomize {label}: {len(objects)} objects validated against Kubernetes {K8S_VERSION}")


# ---- metric names: dashboard and alerts against a live scrape ----

PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "by", "without", "on", "ignoring", "group_left", "group_right",
                   "offset", "inf", "nan", "le"}


def promql_metric_names(expr):
    """The metric names an expression selects: identifiers that are not functions, keywords, labels,
    strings, durations or Grafana variables."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\$\{?\w+\}?", "", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        before = e[m.start() - 1] if m.start() > 0 else " "
        if before.isdigit() or before == ".":
            continue
        if e[m.end():].lstrip().startswith("("):
            continue
        if m.group(0) in PROMQL_KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def dashboard_queries():
    dashboard = json.load(open(os.path.join(CHART, "files", "dashboards", "wagate.json")))
    queries = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                queries.append((f"panel '{p['title']}'", t["expr"]))
            walk(p.get("panels", []))

    walk(dashboard["panels"])
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        if var.get("type") == "query" and text:
            m = re.match(r"\s*label_values\(\s*([^,)]+)", text)
            queries.append((f"variable '{var['name']}'", m.group(1) if m else text))
    return queries


def alert_queries():
    values = yaml.safe_load(open(os.path.join(CHART, "ci", "cluster-values.yaml")))
    rendered = helm_python.Chart.load(CHART).render(values, name="m", namespace="m")
    queries = []
    for obj in documents(rendered["wagate/templates/prometheusrule.yaml"]):
        for group in obj["spec"]["groups"]:
            for rule in group["rules"]:
                queries.append((f"alert {rule['alert']}", rule["expr"]))
    return queries


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, key=None, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("X-API-Key", key)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def exercise(base, key):
    """Traffic that makes a single sim node record its series: sessions, a send, an inbound message, a
    webhook delivery attempt and a few rate-limited requests."""
    ids = []
    for n, phone in enumerate(("4915100000001", "4915100000002")):
        status, text = call(base, "POST", "/api/sessions", key, {"name": f"metrics-check-{n}"})
        assert status == 201, text
        sid = json.loads(text)["id"]
        call(base, "POST", f"/api/sessions/{sid}/start", key)
        status, text = call(base, "POST", f"/api/sim/sessions/{sid}/scan", key, {"phone": phone})
        assert status == 200, text
        ids.append(sid)
    for _ in range(100):
        if all(json.loads(call(base, "GET", f"/api/sessions/{s}", key)[1]).get("status") == "ready" for s in ids):
            break
        time.sleep(0.1)
    call(base, "POST", f"/api/sessions/{ids[1]}/webhooks", key,
         {"url": "http://127.0.0.1:9/hook", "events": ["message.received"], "secret": "metrics-check-secret-01"})
    call(base, "POST", f"/api/sessions/{ids[0]}/messages/send-text", key, {"chatId": "4915100000002@c.us", "text": "hi"})
    call(base, "POST", f"/api/sim/sessions/{ids[0]}/inbound", key, {"from": "4915100000009@c.us", "type": "text", "body": "in"})
    time.sleep(1.0)
    for _ in range(60):
        call(base, "GET", "/api/sessions", key)
    time.sleep(1.2)


def scrape_families(text):
    types, samples = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
        elif line and not line.startswith("#"):
            samples.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return types, samples


def exported(name, types, samples):
    if name in types or name in samples:
        return True
    for suffix, kinds in (("_bucket", ("histogram",)), ("_sum", ("histogram", "summary")), ("_count", ("histogram", "summary"))):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in kinds:
            return True
    return False


def check_metrics():
    binary = os.environ.get("WAGATE_BIN") or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "wagate")
    if not os.path.isfile(binary):
        fail(f"no wagate binary at {binary} (build it, or set WAGATE_BIN)")
        return
    port, key, token = free_port(), "metrics-check-admin-key-0123456789abcdef", "metrics-check-token"
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        env = {"PATH": os.environ.get("PATH", ""), "API_PORT": str(port), "BIND_HOST": "127.0.0.1", "DATA_DIR": data,
               "ENGINE_TYPE": "sim", "API_MASTER_KEY": key, "METRICS_TOKEN": token, "NODE_ENV": "test",
               "LOG_LEVEL": "warn", "RATE_LIMIT_SHORT_LIMIT": "50", "WEBHOOK_SSRF_PROTECT": "false",
               "WEBHOOK_RETRY_DELAY": "100"}
        log = open(os.path.join(data, "node.log"), "w")
        node = subprocess.Popen([binary], env=env, stdout=log, stderr=log)
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    if call(base, "GET", "/api/health/ready")[0] == 200:
                        break
                except OSError:
                    pass
                if node.poll() is not None:
                    break
                time.sleep(0.1)
            else:
                fail("wagate did not become ready in 60 s")
                return
            if node.poll() is not None:
                fail(f"wagate exited: {open(os.path.join(data, 'node.log')).read()[-2000:]}")
                return
            exercise(base, key)
            status, text = call(base, "GET", "/api/metrics", token=token)
        finally:
            node.send_signal(signal.SIGTERM)
            try:
                node.wait(timeout=20)
            except subprocess.TimeoutExpired:
                node.kill()
    if status != 200:
        fail(f"GET /api/metrics with the token answered {status}")
        return
    types, samples = scrape_families(text)
    queries = dashboard_queries() + alert_queries()
    used = {}
    for where, expr in queries:
        for name in promql_metric_names(expr):
            used.setdefault(name, []).append(where)
    missing = {n: w for n, w in sorted(used.items()) if not exported(n, types, samples)}
    print(f"metrics: {len(queries)} dashboard and alert queries name {len(used)} metrics; the live scrape has "
          f"{len(types)} families: {', '.join(sorted(types)) or 'none'}")
    for name, where in missing.items():
        fail(f"metric {name} is not exported by a live wagate (used by {', '.join(sorted(set(where)))})")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    steps = {"chart": check_chart, "kustomize": check_kustomize, "metrics": check_metrics}
    if what not in steps:
        print(f"usage: deploy_check.py {'|'.join(steps)}", file=sys.stderr)
        return 2
    steps[what]()
    if failures:
        print(f"deploy_check {what}: {len(failures)} problem(s)")
        return 1
    print(f"deploy_check {what}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
