-- Engine credentials (auth state) per session, keyed by session id so any node can take a session over
-- and deleting the session removes them (spec rule 8).
CREATE TABLE engine_auth (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    engine     TEXT NOT NULL,
    data       TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, engine)
);
