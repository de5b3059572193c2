-- Data DB, PostgreSQL: the sixteen tables of the spec's export list plus gateway bookkeeping.
-- Ids are TEXT (UUID strings), timestamps are INTEGER epoch milliseconds (UTC), JSON is TEXT.

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    status           TEXT NOT NULL DEFAULT 'created',
    phone            TEXT,
    push_name        TEXT,
    last_error       TEXT,
    config           TEXT NOT NULL DEFAULT '{}',
    proxy_url        TEXT,
    restriction      TEXT,
    desired_running  BOOLEAN NOT NULL DEFAULT FALSE,
    has_credentials  BOOLEAN NOT NULL DEFAULT FALSE,
    lease_generation BIGINT NOT NULL DEFAULT 0,
    owner_node       TEXT,
    connected_at     BIGINT,
    last_active      BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX sessions_status_idx ON sessions (status);

CREATE TABLE webhooks (
    id                TEXT PRIMARY KEY,
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    url               TEXT NOT NULL,
    events            TEXT NOT NULL DEFAULT '["*"]',
    secret            TEXT,
    headers           TEXT NOT NULL DEFAULT '{}',
    active            BOOLEAN NOT NULL DEFAULT TRUE,
    filters           TEXT,
    retry_count       INTEGER NOT NULL DEFAULT 3,
    last_triggered_at BIGINT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX webhooks_session_idx ON webhooks (session_id);

CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    wa_message_id  TEXT NOT NULL,
    chat_id        TEXT NOT NULL,
    from_jid       TEXT NOT NULL,
    to_jid         TEXT NOT NULL,
    chat_name      TEXT,
    author         TEXT,
    body           TEXT,
    type           TEXT NOT NULL,
    direction      TEXT NOT NULL,
    status         TEXT NOT NULL,
    timestamp      BIGINT NOT NULL,
    has_media      BOOLEAN NOT NULL DEFAULT FALSE,
    media          TEXT,
    mentioned_ids  TEXT,
    is_group       BOOLEAN NOT NULL DEFAULT FALSE,
    quoted_id      TEXT,
    extra          TEXT,
    starred        BOOLEAN NOT NULL DEFAULT FALSE,
    revoked        BOOLEAN NOT NULL DEFAULT FALSE,
    created_at     BIGINT NOT NULL,
    UNIQUE (session_id, wa_message_id)
);
CREATE INDEX messages_page_idx ON messages (session_id, created_at DESC, id DESC);
CREATE INDEX messages_chat_idx ON messages (session_id, chat_id, created_at DESC);

CREATE TABLE message_batches (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status       TEXT NOT NULL,
    items        TEXT NOT NULL,
    options      TEXT NOT NULL,
    results      TEXT NOT NULL,
    next_index   BIGINT NOT NULL DEFAULT 0,
    started_at   BIGINT,
    completed_at BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX message_batches_status_idx ON message_batches (status);

CREATE TABLE templates (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    body       TEXT NOT NULL,
    header     TEXT,
    footer     TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (session_id, name)
);

CREATE TABLE baileys_stored_messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    message_id TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, message_id)
);

CREATE TABLE lid_mappings (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    lid        TEXT NOT NULL,
    pn         TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, lid)
);

CREATE TABLE chat_states (
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    chat_id         TEXT NOT NULL,
    name            TEXT,
    is_group        BOOLEAN NOT NULL DEFAULT FALSE,
    archived        BOOLEAN NOT NULL DEFAULT FALSE,
    pinned          BOOLEAN NOT NULL DEFAULT FALSE,
    muted           BOOLEAN NOT NULL DEFAULT FALSE,
    mute_expiration BIGINT NOT NULL DEFAULT 0,
    unread_count    INTEGER NOT NULL DEFAULT 0,
    labels          TEXT NOT NULL DEFAULT '[]',
    last_message_at BIGINT,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (session_id, chat_id)
);

CREATE TABLE plugin_instances (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    version    TEXT NOT NULL,
    enabled    BOOLEAN NOT NULL DEFAULT FALSE,
    config     TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE conversation_mappings (
    id          TEXT PRIMARY KEY,
    integration TEXT NOT NULL,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    chat_id     TEXT NOT NULL,
    external_id TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (integration, session_id, chat_id)
);

CREATE TABLE ingress_events (
    id           TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    session_id   TEXT,
    payload      TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    created_at   BIGINT NOT NULL,
    processed_at BIGINT
);

CREATE TABLE webhook_outbox_events (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    session_id       TEXT NOT NULL,
    event            TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    last_status_code INTEGER,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX webhook_outbox_due_idx ON webhook_outbox_events (status, next_attempt_at);

CREATE TABLE webhook_delivery_failures (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    event            TEXT NOT NULL,
    url              TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    delivery_id      TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    last_status_code INTEGER,
    last_error       TEXT,
    payload          TEXT NOT NULL,
    created_at       BIGINT NOT NULL
);
CREATE INDEX webhook_failures_session_idx ON webhook_delivery_failures (session_id, created_at DESC);

CREATE TABLE integration_delivery_failures (
    id          TEXT PRIMARY KEY,
    integration TEXT NOT NULL,
    session_id  TEXT,
    payload     TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    last_error  TEXT,
    created_at  BIGINT NOT NULL
);

CREATE TABLE status_updates (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status_id   TEXT NOT NULL,
    contact     TEXT NOT NULL,
    direction   TEXT NOT NULL,
    type        TEXT NOT NULL,
    caption     TEXT,
    has_media   BOOLEAN NOT NULL DEFAULT FALSE,
    media       TEXT,
    recipients  TEXT,
    posted_at   BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (session_id, status_id)
);

CREATE TABLE automation_rules (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    enabled          BOOLEAN NOT NULL DEFAULT TRUE,
    conditions       TEXT NOT NULL DEFAULT '[]',
    reply_text       TEXT NOT NULL,
    cooldown_seconds INTEGER NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);

-- Not exported: replay cache for Idempotency-Key on single sends (24 h).
CREATE TABLE idempotency_keys (
    session_id   TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status_code  INTEGER NOT NULL,
    response     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (session_id, key)
);
