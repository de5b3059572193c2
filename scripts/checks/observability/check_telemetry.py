"""Scrapes a wagate node (ROLE=api) and a separate wagate-worker and checks the metric contract, the access
log and readiness. Run by scripts/checks/observability.sh (which provides PROMTOOL and the binaries).
Everything listens on loopback; every process started here is stopped here, by its own pid."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.parser import text_string_to_metric_families

ADMIN_KEY = "obs-check-admin-key-0123456789"
TOKEN = "obs-check-metrics-token"

# Every family of the metrics contract, with its type; the worker exposes the delivery side.
NODE_FAMILIES = {
    "wagate_build_info": "gauge",
    "wagate_http_requests": "counter",
    "wagate_http_request_duration_seconds": "histogram",
    "wagate_rate_limited": "counter",
    "wagate_rate_limit_fallback": "counter",
    "wagate_sessions": "gauge",
    "wagate_sessions_unowned": "gauge",
    "wagate_messages_received": "counter",
    "wagate_messages_sent": "counter",
    "wagate_messages_failed": "counter",
    "wagate_sends_refused": "counter",
    "wagate_webhook_deliveries": "counter",
    "wagate_webhook_delivery_duration_seconds": "histogram",
    "wagate_event_delivery_lag_seconds": "histogram",
    "wagate_outbox_rows": "gauge",
    "wagate_queue_jobs": "gauge",
    "wagate_session_reconnects": "counter",
    "wagate_session_reconnect_loop_alerts": "counter",
    "wagate_leases_held": "gauge",
    "wagate_takeovers": "counter",
    "wagate_forwards": "counter",
    "wagate_forward_duration_seconds": "histogram",
    "wagate_engine_query_timeouts": "counter",
    "wagate_ready": "gauge",
    "wagate_events_persist_failed": "counter",
    "process_resident_memory_bytes": "gauge",
    "process_cpu_seconds": "counter",
    "process_open_fds": "gauge",
    "process_threads": "gauge",
}
WORKER_FAMILIES = {
    name: kind
    for name, kind in NODE_FAMILIES.items()
    if name.startswith(("wagate_build_info", "wagate_webhook", "wagate_event_delivery", "wagate_outbox",
                        "wagate_queue", "process_"))
}
FORBIDDEN_LABELS = {"session_id", "sessionId", "jid", "message_id", "chat_id"}

failures = []
procs = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(method, url, body=None, headers=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def api(method, base, path, body=None):
    status, text = request(method, base + path, body, {"X-API-Key": ADMIN_KEY})
    return status, (json.loads(text) if text.strip().startswith(("{", "[")) else text)


def wait_until(what, predicate, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    check(False, "timed out waiting for " + what)
    return False


def start(argv, env, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.append(proc)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Receiver(BaseHTTPRequestHandler):
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Receiver.received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def scrape(url):
    status, text = request("GET", url, headers={"Authorization": "Bearer " + TOKEN})
    check(status == 200, f"scrape {url} answers 200 (got {status})")
    return text


def check_scrape(who, text, families):
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    for name, kind in families.items():
        family = parsed.get(name)
        check(family is not None, f"{who}: family {name} present")
        if family is None:
            continue
        check(family.type == kind, f"{who}: {name} is a {kind} (got {family.type})")
        check(bool(family.documentation), f"{who}: {name} has HELP text")
        for sample in family.samples:
            bad = FORBIDDEN_LABELS.intersection(sample.labels)
            check(not bad, f"{who}: {sample.name} has no unbounded label {sorted(bad)}")
    with tempfile.NamedTemporaryFile("w", suffix=".prom", delete=False) as f:
        f.write(text)
    lint = subprocess.run([os.environ["PROMTOOL"], "check", "metrics"], stdin=open(f.name),
                          capture_output=True, text=True)
    os.unlink(f.name)
    check(lint.returncode == 0, f"{who}: promtool check metrics passes: {lint.stdout}{lint.stderr}".strip())
    return parsed


def sample_value(family, **labels):
    return sum(s.value for s in family.samples
               if s.name.endswith("_total") or s.name == family.name
               if all(s.labels.get(k) == v for k, v in labels.items()))


def embedded_pair(work):
    """A node with ROLE=api and a wagate-worker on one SQLite data DB and queue file."""
    data_dir = os.path.join(work, "data")
    api_port, worker_port = free_port(), free_port()
    common = dict(os.environ, DATA_DIR=data_dir, BIND_HOST="127.0.0.1", METRICS_TOKEN=TOKEN,
                  WEBHOOK_SSRF_PROTECT="false", LOG_LEVEL="info", NODE_ID="obs-node")
    node_env = dict(common, API_PORT=str(api_port), ROLE="api", ENGINE_TYPE="sim", API_MASTER_KEY=ADMIN_KEY,
                    RATE_LIMIT_SHORT_LIMIT="1000", RATE_LIMIT_MEDIUM_LIMIT="100000",
                    RATE_LIMIT_LONG_LIMIT="1000000")
    worker_env = dict(common, METRICS_PORT=str(worker_port), LOG_FORMAT="json")
    node_log = os.path.join(work, "node.log")
    node = start([os.environ["WAGATE_BIN"]], node_env, node_log)
    base = f"http://127.0.0.1:{api_port}"
    wait_until("the node", lambda: request("GET", base + "/api/health/ready")[0] == 200)
    worker = start([os.environ["WAGATE_WORKER_BIN"]], worker_env, os.path.join(work, "worker.log"))
    worker_metrics = f"http://127.0.0.1:{worker_port}/api/metrics"
    wait_until("the worker's scrape", lambda: request("GET", worker_metrics)[0] in (401, 200))

    status, _ = request("GET", worker_metrics)
    check(status == 401, f"worker scrape without the token answers 401 (got {status})")
    status, _ = request("GET", worker_metrics, headers={"Authorization": "Bearer wrong"})
    check(status == 401, f"worker scrape with a wrong token answers 401 (got {status})")

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"

    status, session = api("POST", base, "/api/sessions", {"name": "obs-check"})
    check(status == 201, f"session created (got {status} {session})")
    sid = session["id"]
    status, hook = api("POST", base, f"/api/sessions/{sid}/webhooks",
                       {"url": hook_url, "events": ["*"], "retryCount": 0})
    check(status == 201, f"webhook created (got {status} {hook})")
    status, _ = api("POST", base, f"/api/sessions/{sid}/start")
    check(status in (200, 201), f"session started (got {status})")
    wait_until("a delivery by the worker", lambda: len(Receiver.received) > 0)
    api("GET", base, f"/api/sessions/{sid}")

    node_text = scrape(base + "/api/metrics")
    node_families = check_scrape("node", node_text, NODE_FAMILIES)
    worker_text = scrape(worker_metrics)
    worker_families = check_scrape("worker", worker_text, WORKER_FAMILIES)

    if "wagate_http_requests" in node_families:
        routes = {s.labels.get("route") for s in node_families["wagate_http_requests"].samples}
        check("/api/sessions/{sessionId}" in routes, f"HTTP requests carry the route template ({sorted(routes)})")
        check(not any(sid in (r or "") for r in routes), "no raw session id in a route label")
    if "wagate_webhook_deliveries" in worker_families:
        delivered = sample_value(worker_families["wagate_webhook_deliveries"], outcome="success")
        check(delivered >= 1, f"the worker counts its successful deliveries ({delivered})")
    if "wagate_build_info" in worker_families:
        roles = {s.labels.get("role") for s in worker_families["wagate_build_info"].samples}
        check(roles == {"worker"}, f"the worker's build info says role=worker ({roles})")

    stop(worker)
    stop(node)
    receiver.shutdown()
    with open(node_log) as f:
        access = [line for line in f if "wagate::access" in line and "/api/sessions/{sessionId}/start" in line]
    check(len(access) == 1, f"one access log line for the start request ({len(access)})")
    if access:
        line = access[0]
        for needle in ["method=\"POST\"", "status=", "latency_ms=", "request_id=", "key_id=", "role=\"admin\"",
                       "client=127.0.0.1", "node=obs-node"]:
            check(needle in line, f"access log names {needle}")
        check(ADMIN_KEY not in line, "the access log never shows the key")
        check("\x1b[" not in line, "no ANSI escapes in a piped log")
    with open(os.path.join(work, "worker.log")) as f:
        lines = [line for line in f if line.strip()]
    check(all(line.lstrip().startswith("{") for line in lines), "the worker logs JSON with LOG_FORMAT=json")


def readiness(work):
    """A cluster node on its own Redis: readiness is 503 while that Redis is down and while draining."""
    redis_port, api_port = free_port(), free_port()
    redis_dir = os.path.join(work, "redis")
    os.makedirs(redis_dir)
    redis_argv = ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--dir", redis_dir]
    redis = start(redis_argv, dict(os.environ), os.path.join(work, "redis.log"))
    wait_until("the check's Redis", lambda: socket.create_connection(("127.0.0.1", redis_port), 1).close() is None)
    db = f"wagate_obs_{os.getpid()}"
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {db}"], check=True)
    env = dict(os.environ, DATA_DIR=os.path.join(work, "cluster"), BIND_HOST="127.0.0.1", API_PORT=str(api_port),
               ENGINE_TYPE="sim", API_MASTER_KEY=ADMIN_KEY, REDIS_ENABLED="true",
               REDIS_URL=f"redis://127.0.0.1:{redis_port}", DATABASE_TYPE="postgres",
               DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{db}", NODE_ID="obs-ready",
               NODE_URL=f"http://127.0.0.1:{api_port}", QUEUE_PREFIX=f"obs{os.getpid()}-",
               REDIS_KEY_PREFIX=f"obs{os.getpid()}:")
    node = start([os.environ["WAGATE_BIN"]], env, os.path.join(work, "cluster-node.log"))
    base = f"http://127.0.0.1:{api_port}"
    try:
        ready = lambda: request("GET", base + "/api/health/ready")[0]
        check(wait_until("the cluster node ready", lambda: ready() == 200), "cluster node ready with Redis up")
        stop(redis)
        check(wait_until("503 with Redis down", lambda: ready() == 503), "readiness 503 while Redis is down")
        redis = start(redis_argv, dict(os.environ), os.path.join(work, "redis2.log"))
        check(wait_until("200 with Redis back", lambda: ready() == 200, 60), "readiness 200 once Redis is back")
        status, _ = api("POST", base, "/api/infra/drain")
        check(status == 200, f"drain answers 200 (got {status})")
        check(ready() == 503, "readiness 503 while draining")
        status, body = api("GET", base, "/api/infra/status")
        check(status == 200 and body.get("draining") is True and "webhooks" in body.get("queue", {}),
              f"infra status shows the drain and the queue block ({body})")
    finally:
        stop(node)
        stop(redis)
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE IF EXISTS {db}"])


def main():
    work = tempfile.mkdtemp(prefix="wagate-obs-")
    try:
        embedded_pair(work)
        readiness(work)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if not failures:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("logs kept in", work)
    if failures:
        print(f"{len(failures)} observability check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("observability checks passed")


if __name__ == "__main__":
    main()
