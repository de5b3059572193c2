-- Main DB (always a local SQLite file): API keys and the audit log. Never exported.
CREATE TABLE api_keys (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    key_hash         TEXT NOT NULL UNIQUE,
    key_prefix       TEXT NOT NULL,
    role             TEXT NOT NULL,
    allowed_sessions TEXT,
    allowed_ips      TEXT,
    is_active        BOOLEAN NOT NULL DEFAULT TRUE,
    expires_at       BIGINT,
    last_used_at     BIGINT,
    usage_count      BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);

CREATE TABLE audit_logs (
    id           TEXT PRIMARY KEY,
    action       TEXT NOT NULL,
    severity     TEXT NOT NULL,
    api_key_id   TEXT,
    api_key_name TEXT,
    session_id   TEXT,
    ip_address   TEXT,
    method       TEXT,
    path         TEXT,
    status_code  INTEGER,
    metadata     TEXT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX audit_logs_created_idx ON audit_logs (created_at DESC);
CREATE INDEX audit_logs_action_idx ON audit_logs (action);
