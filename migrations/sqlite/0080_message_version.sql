-- A message row's version, raised by every update of the row (status, edit, revoke, star) and restamped by a
-- data import: message pages serve a row's JSON from memory while the row's version is the one it was built
-- from (`messaging/page_cache.rs`).
ALTER TABLE messages ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
