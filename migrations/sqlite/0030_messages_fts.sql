-- Full-text index of message bodies for the built-in search provider. External-content FTS5 table over
-- `messages` (keyed by its rowid), kept in step by triggers; the rebuild indexes rows already stored.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body,
    content = 'messages',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, body) VALUES (new.rowid, coalesce(new.body, ''));
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', old.rowid, coalesce(old.body, ''));
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF body ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', old.rowid, coalesce(old.body, ''));
    INSERT INTO messages_fts (rowid, body) VALUES (new.rowid, coalesce(new.body, ''));
END;

INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
