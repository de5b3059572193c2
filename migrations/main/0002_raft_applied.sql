-- With MAIN_DB_REPLICATION=raft the main DB is a raft state machine: the last applied log id and membership
-- are written in the same transaction as the entries they cover, so a crash replays to the same state.
CREATE TABLE raft_applied (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    last_applied TEXT,
    membership   TEXT NOT NULL
);
