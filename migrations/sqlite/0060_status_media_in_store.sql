-- Status media moves out of the database into the media store. `media_key` names the object
-- ({sessionId}/{sha256}); `media` keeps only {mimetype, sizeBytes}. Rows written before this carry
-- {mimetype, data} (base64) in `media` and no key: the node moves each into the store at boot
-- (events/statuses.rs `move_inline_media`) and then sets the key and drops the base64.
ALTER TABLE status_updates ADD COLUMN media_key TEXT;
CREATE INDEX status_updates_inline_media ON status_updates (id) WHERE media_key IS NULL AND media IS NOT NULL;
