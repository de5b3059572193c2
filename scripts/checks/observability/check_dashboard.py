"""The queue dashboard in headless Chromium, against a real node on loopback. Run by
scripts/checks/queue-dashboard.sh (which provides WAGATE_BIN, CHROMIUM and SCREENSHOT_DIR)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from playwright.sync_api import sync_playwright

import check_telemetry
from check_telemetry import free_port, request, wait_until

ADMIN_KEY = "dashboard-check-admin-key-0123"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


class Receiver(BaseHTTPRequestHandler):
    accepting = False
    received = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if Receiver.accepting:
            Receiver.received.append(body)
            self.send_response(200)
        else:
            self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


def api(method, base, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"X-API-Key": ADMIN_KEY, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    work = tempfile.mkdtemp(prefix="wagate-dash-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, DATA_DIR=os.path.join(work, "data"), BIND_HOST="127.0.0.1", API_PORT=str(port),
               ENGINE_TYPE="sim", API_MASTER_KEY=ADMIN_KEY, WEBHOOK_SSRF_PROTECT="false",
               RATE_LIMIT_SHORT_LIMIT="1000", RATE_LIMIT_MEDIUM_LIMIT="100000", RATE_LIMIT_LONG_LIMIT="1000000")
    log = open(os.path.join(work, "node.log"), "w")
    node = subprocess.Popen([os.environ["WAGATE_BIN"]], env=env, stdout=log, stderr=subprocess.STDOUT)
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        wait_until("the node", lambda: request("GET", base + "/api/health/ready")[0] == 200)
        status, _ = request("GET", base + "/api/admin/queues")
        check(status == 401, f"the dashboard without a key (not a navigation) answers 401 (got {status})")
        status, session = api("POST", base, "/api/sessions", {"name": "dash-check"})
        sid = session["id"]
        hook_url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        status, _ = api("POST", base, f"/api/sessions/{sid}/webhooks",
                        {"url": hook_url, "events": ["session.status"], "retryCount": 0})
        check(status == 201, f"webhook created ({status})")
        api("POST", base, f"/api/sessions/{sid}/start")

        def failed_jobs():
            _, body = api("GET", base, "/api/admin/queues/data")
            return [j for q in body.get("queues", []) if q["name"] == "webhook-queue" for j in q["failed"]]

        wait_until("a failed delivery", lambda: len(failed_jobs()) > 0)
        failed_id = failed_jobs()[0]["id"]

        with sync_playwright() as pw:
            # A fresh profile of its own (Playwright takes the user data dir as a parameter, not a flag).
            browser = pw.chromium.launch_persistent_context(
                os.path.join(work, "chromium-profile"),
                executable_path=os.environ["CHROMIUM"],
                headless=True,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
            )
            page = browser.new_page()
            console_errors, outside = [], []
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.on("request", lambda r: outside.append(r.url)
                    if urllib.parse.urlparse(r.url).hostname not in ("127.0.0.1", "localhost") else None)
            page.goto(base + "/api/admin/queues")
            page.fill("#key", ADMIN_KEY)
            page.click("#login-form button[type=submit]")
            row = page.locator(f"#queue-webhook-queue tr[data-job='{failed_id}'][data-state='failed']").first
            row.wait_for(timeout=15000)
            check(row.is_visible(), "the dashboard shows the failed delivery")
            check("HTTP 500" in row.inner_text(), "the failed row shows its last error and status code")
            ingress_note = page.locator("#queue-ingress-queue .fed-by.not-built").inner_text()
            check("nothing puts jobs on this queue" in ingress_note,
                  "ingress-queue says that nothing in this build feeds it")
            Receiver.accepting = True
            row.locator("button[data-action='retry']").click()
            page.locator("#message").filter(has_text="retried").wait_for(timeout=15000)
            delivered = wait_until("the retried delivery", lambda: len(Receiver.received) > 0)
            check(delivered, "a Retry click delivers the failed job")
            page.locator(f"#queue-webhook-queue tr[data-job='{failed_id}'][data-state='completed']").first.wait_for(
                timeout=15000)
            os.makedirs(os.environ["SCREENSHOT_DIR"], exist_ok=True)
            shot = os.path.join(os.environ["SCREENSHOT_DIR"], "queue-dashboard.png")
            page.screenshot(path=shot, full_page=True)
            check(os.path.getsize(shot) > 0, f"screenshot saved to {shot}")
            check(not console_errors, f"no console error ({console_errors})")
            check(not outside, f"nothing fetched outside loopback ({outside})")
            browser.close()
        audited = wait_until("the audit entry", lambda: "queue_job_retried" in json.dumps(
            api("GET", base, "/api/audit?limit=50")[1]))
        check(audited, "the retry is in the audit log")
    finally:
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(timeout=20)
        except subprocess.TimeoutExpired:
            node.kill()
        receiver.shutdown()
        if not failures:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("logs kept in", work)
    failures.extend(check_telemetry.failures)
    if failures:
        print(f"{len(failures)} dashboard check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("queue dashboard checks passed")


if __name__ == "__main__":
    main()
