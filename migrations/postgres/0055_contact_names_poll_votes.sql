-- Names the network gave us for accounts (history-sync pushnames), one row per (session, contact).
CREATE TABLE contact_names (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    jid        TEXT NOT NULL,
    push_name  TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, jid)
);

-- The current (decrypted) vote of each voter on a poll; an empty selection removes the row.
CREATE TABLE poll_votes (
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    poll_message_id TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    voter           TEXT NOT NULL,
    options         TEXT NOT NULL,
    timestamp       BIGINT NOT NULL,
    PRIMARY KEY (session_id, poll_message_id, voter)
);
