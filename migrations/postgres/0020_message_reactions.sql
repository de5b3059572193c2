-- Reactions on stored messages, one row per (message, sender); an empty reaction removes the row.
CREATE TABLE message_reactions (
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    wa_message_id TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    sender_id     TEXT NOT NULL,
    emoji         TEXT NOT NULL,
    timestamp     BIGINT NOT NULL,
    PRIMARY KEY (session_id, wa_message_id, sender_id)
);
