-- Socket engine (whatsapp-rust) auth state: every store of the library's `Backend`, one row set per session,
-- so any node can take a session over. Every table is keyed by `session_id` and goes with the session
-- (ON DELETE CASCADE); logout removes the rows explicitly (`wagate_engine_socket::store::delete_session_state`).
-- Binary values are opaque library records (BLOB); the row layout is ours, not the library's sqlite-storage.

-- The library's `Device` (keys, identity, account), serde JSON; `linked` mirrors `pn IS NOT NULL` for cheap checks.
CREATE TABLE socket_device (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    device     TEXT NOT NULL,
    linked     BOOLEAN NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Per-session counters and pointers that are not rows of their own.
CREATE TABLE socket_meta (
    session_id         TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    device_creates     BIGINT NOT NULL DEFAULT 0,
    latest_sync_key_id BLOB
);

CREATE TABLE socket_identities (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    address      TEXT NOT NULL,
    identity_key BLOB NOT NULL,
    PRIMARY KEY (session_id, address)
);

CREATE TABLE socket_signal_sessions (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    record     BLOB NOT NULL,
    PRIMARY KEY (session_id, address)
);

CREATE TABLE socket_prekeys (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    prekey_id  BIGINT NOT NULL,
    record     BLOB NOT NULL,
    uploaded   BOOLEAN NOT NULL,
    PRIMARY KEY (session_id, prekey_id)
);

CREATE TABLE socket_signed_prekeys (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    prekey_id  BIGINT NOT NULL,
    record     BLOB NOT NULL,
    PRIMARY KEY (session_id, prekey_id)
);

CREATE TABLE socket_sender_keys (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    record     BLOB NOT NULL,
    PRIMARY KEY (session_id, address)
);

CREATE TABLE socket_sync_keys (
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key_id        BLOB NOT NULL,
    key_data      BLOB NOT NULL,
    fingerprint   BLOB NOT NULL,
    key_timestamp BIGINT NOT NULL,
    PRIMARY KEY (session_id, key_id)
);

-- App-state collection versions; `index_values` is the ltHash index->value map in our length-prefixed codec.
CREATE TABLE socket_app_state_versions (
    session_id         TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    collection         TEXT NOT NULL,
    version            BIGINT NOT NULL,
    hash               BLOB NOT NULL,
    index_values       BLOB NOT NULL,
    mac_mismatch_fatal BOOLEAN NOT NULL,
    PRIMARY KEY (session_id, collection)
);

CREATE TABLE socket_mutation_macs (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    collection TEXT NOT NULL,
    index_mac  BLOB NOT NULL,
    value_mac  BLOB NOT NULL,
    PRIMARY KEY (session_id, collection, index_mac)
);

CREATE TABLE socket_sender_key_devices (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    group_jid  TEXT NOT NULL,
    device_jid TEXT NOT NULL,
    has_key    BOOLEAN NOT NULL,
    PRIMARY KEY (session_id, group_jid, device_jid)
);
CREATE INDEX socket_sender_key_devices_device_idx ON socket_sender_key_devices (session_id, device_jid);

-- `pn_current` marks the row the phone number currently resolves to (the reverse index of the mapping).
CREATE TABLE socket_lid_mappings (
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    lid             TEXT NOT NULL,
    phone_number    TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    learning_source TEXT NOT NULL,
    pn_current      BOOLEAN NOT NULL,
    PRIMARY KEY (session_id, lid)
);
CREATE INDEX socket_lid_mappings_phone_idx ON socket_lid_mappings (session_id, phone_number);

CREATE TABLE socket_base_keys (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    message_id TEXT NOT NULL,
    base_key   BLOB NOT NULL,
    PRIMARY KEY (session_id, address, message_id)
);

-- `devices` is the JSON list of the library's `DeviceInfo`.
CREATE TABLE socket_device_lists (
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL,
    devices        TEXT NOT NULL,
    list_timestamp BIGINT NOT NULL,
    phash          TEXT,
    raw_id         BIGINT,
    PRIMARY KEY (session_id, user_id)
);

CREATE TABLE socket_group_metadata (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    group_jid  TEXT NOT NULL,
    metadata   BLOB NOT NULL,
    PRIMARY KEY (session_id, group_jid)
);

CREATE TABLE socket_tc_tokens (
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    jid              TEXT NOT NULL,
    token            BLOB NOT NULL,
    token_timestamp  BIGINT NOT NULL,
    sender_timestamp BIGINT,
    PRIMARY KEY (session_id, jid)
);

-- Sent-message payloads kept for retry receipts; `created_at` in Unix seconds (the library's clock).
CREATE TABLE socket_sent_messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    chat_jid   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    payload    BLOB NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, chat_jid, message_id)
);
CREATE INDEX socket_sent_messages_created_idx ON socket_sent_messages (session_id, created_at);

-- Decrypted inbound messages awaiting the durability hook; `created_at` in Unix seconds.
CREATE TABLE socket_pending_inbound (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    chat_jid   TEXT NOT NULL,
    sender_jid TEXT NOT NULL,
    message_id TEXT NOT NULL,
    message    BLOB NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, chat_jid, sender_jid, message_id)
);
CREATE INDEX socket_pending_inbound_created_idx ON socket_pending_inbound (session_id, created_at);

-- Message secrets (poll votes, reactions, edits); `expires_at` 0 = never, Unix seconds otherwise.
CREATE TABLE socket_msg_secrets (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    chat_jid   TEXT NOT NULL,
    sender_jid TEXT NOT NULL,
    message_id TEXT NOT NULL,
    secret     BLOB NOT NULL,
    expires_at BIGINT NOT NULL,
    message_ts BIGINT NOT NULL,
    PRIMARY KEY (session_id, chat_jid, sender_jid, message_id)
);
CREATE INDEX socket_msg_secrets_expires_idx ON socket_msg_secrets (session_id, expires_at);
