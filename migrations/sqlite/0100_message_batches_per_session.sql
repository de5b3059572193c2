-- A bulk batch's id is unique within its session only: another session may use the same batchId, and a
-- scoped key learns nothing of other sessions' batches from a duplicate refusal. SQLite cannot change a
-- primary key in place, so the table is rebuilt with the key (session_id, id).
CREATE TABLE message_batches_by_session (
    id           TEXT NOT NULL,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status       TEXT NOT NULL,
    items        TEXT NOT NULL,
    options      TEXT NOT NULL,
    results      TEXT NOT NULL,
    next_index   INTEGER NOT NULL DEFAULT 0,
    started_at   BIGINT,
    completed_at BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);
INSERT INTO message_batches_by_session (id, session_id, status, items, options, results, next_index,
    started_at, completed_at, created_at, updated_at)
SELECT id, session_id, status, items, options, results, next_index, started_at, completed_at, created_at,
    updated_at
FROM message_batches;
DROP TABLE message_batches;
ALTER TABLE message_batches_by_session RENAME TO message_batches;
CREATE INDEX message_batches_status_idx ON message_batches (status);
