"""The README's tour through a client generated from the served document: create a session, start it,
link it through the sim control API, send a text, read the messages, create a webhook, list the keys."""

from __future__ import annotations

import sys
import time
import uuid

from wagate_client import AuthenticatedClient
from wagate_client.api.auth import list_keys
from wagate_client.api.messages import list_messages, send_text
from wagate_client.api.sessions import create_session, get_session, start_session
from wagate_client.api.sim import sim_inbound, sim_scan
from wagate_client.api.webhooks import create_webhook
from wagate_client.models import (
    ApiKeyRecord,
    CreateSessionRequest,
    CreateWebhookRequest,
    Message,
    MessageResponse,
    Session,
    SendTextRequest,
    SimInboundRequest,
    SimScanRequest,
    Webhook,
)

from common import BASE, KEY, check


def wait_for(client: AuthenticatedClient, session_id: uuid.UUID, status: str) -> Session:
    deadline = time.monotonic() + 30
    while True:
        session = get_session.sync(session_id, client=client)
        check(isinstance(session, Session), f"get_session answered {session!r}")
        if session.status == status:
            return session
        check(time.monotonic() < deadline, f"session stayed {session.status}, wanted {status}")
        time.sleep(0.1)


def main() -> int:
    client = AuthenticatedClient(
        base_url=BASE, token=KEY, prefix="", auth_header_name="X-API-Key", raise_on_unexpected_status=True
    )
    with client:
        created = create_session.sync_detailed(
            client=client, body=CreateSessionRequest(name=f"tour-{uuid.uuid4().hex[:8]}")
        )
        check(created.status_code == 201 and isinstance(created.parsed, Session), f"create: {created.content!r}")
        session_id = uuid.UUID(created.parsed.id)

        started = start_session.sync_detailed(session_id, client=client)
        check(started.status_code == 200 and isinstance(started.parsed, Session), f"start: {started.content!r}")
        wait_for(client, session_id, "qr_ready")

        scanned = sim_scan.sync_detailed(session_id, client=client, body=SimScanRequest(phone="4915100000201"))
        check(scanned.status_code == 200, f"scan: {scanned.content!r}")
        ready = wait_for(client, session_id, "ready")
        check(ready.phone is not None and "4915100000201" in str(ready.phone), f"linked phone: {ready.phone}")

        inbound = sim_inbound.sync_detailed(
            session_id,
            client=client,
            body=SimInboundRequest.from_dict({"from": "4915199999999@c.us", "type": "text", "body": "hi"}),
        )
        check(inbound.status_code in (200, 201), f"inbound: {inbound.content!r}")

        sent = send_text.sync_detailed(
            session_id, client=client, body=SendTextRequest(chat_id="4915199999999@c.us", text="hello from the tour")
        )
        check(sent.status_code == 201 and isinstance(sent.parsed, MessageResponse), f"send: {sent.content!r}")
        check(bool(sent.parsed.message_id), "send answered a message id")

        messages = list_messages.sync_detailed(session_id, client=client, limit=50)
        check(messages.status_code == 200 and isinstance(messages.parsed, list), f"messages: {messages.content!r}")
        check(all(isinstance(m, Message) for m in messages.parsed), "messages parse as Message")
        bodies = {m.body for m in messages.parsed}
        check({"hi", "hello from the tour"} <= bodies, f"messages hold both texts: {bodies}")

        hook = create_webhook.sync_detailed(
            session_id,
            client=client,
            body=CreateWebhookRequest(url="http://127.0.0.1:9/hook", events=["message.received"]),
        )
        check(hook.status_code == 201 and isinstance(hook.parsed, Webhook), f"webhook: {hook.content!r}")
        check(hook.parsed.events == ["message.received"], f"webhook events: {hook.parsed.events}")

        keys = list_keys.sync_detailed(client=client)
        check(keys.status_code == 200 and isinstance(keys.parsed, list), f"keys: {keys.content!r}")
        check(all(isinstance(k, ApiKeyRecord) for k in keys.parsed) and keys.parsed, "keys parse as ApiKeyRecord")
    print("generated client: the tour ran (create, start, scan, send, read, webhook, keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
