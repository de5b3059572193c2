"""Shared helpers for the client checks: the node under test and a few raw calls to set it up."""

from __future__ import annotations

import os
import time
import uuid

import httpx

BASE = os.environ.get("WAGATE_URL", "http://127.0.0.1:2785")
KEY = os.environ.get("WAGATE_KEY", "")
WORK = os.environ.get("CHECK_WORK", "/tmp")


def raw(key: str | None = KEY) -> httpx.Client:
    headers = {"X-API-Key": key} if key else {}
    return httpx.Client(base_url=BASE, headers=headers, timeout=60)


def call(client: httpx.Client, method: str, path: str, body=None, expect=(200, 201, 202, 204)):
    res = client.request(method, path, json=body)
    if res.status_code not in expect:
        raise AssertionError(f"{method} {path} -> {res.status_code} {res.text}")
    return res.json() if res.content and "json" in res.headers.get("content-type", "") else None


def served_document() -> dict:
    with raw() as c:
        res = c.get("/api/docs/openapi.json")
        res.raise_for_status()
        return res.json()


def wait_status(client: httpx.Client, session_id: str, wanted: str, budget: float = 30.0) -> dict:
    deadline = time.monotonic() + budget
    while True:
        session = call(client, "GET", f"/api/sessions/{session_id}")
        if session["status"] == wanted:
            return session
        if time.monotonic() > deadline:
            raise AssertionError(f"session {session_id} stayed {session['status']}, wanted {wanted}")
        time.sleep(0.1)


def ready_session(client: httpx.Client, prefix: str, phone: str) -> dict:
    """Creates, starts and links a sim session (the phone scans its QR) and returns it once ready."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    session = call(client, "POST", "/api/sessions", {"name": name})
    call(client, "POST", f"/api/sessions/{session['id']}/start")
    wait_status(client, session["id"], "qr_ready")
    call(client, "POST", f"/api/sim/sessions/{session['id']}/scan", {"phone": phone, "pushName": prefix})
    return wait_status(client, session["id"], "ready")


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)
