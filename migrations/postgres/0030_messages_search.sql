-- Full-text search of message bodies for the built-in search provider: a generated tsvector column
-- (language-neutral 'simple' configuration) and its GIN index.
ALTER TABLE messages
    ADD COLUMN body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', coalesce(body, ''))) STORED;

CREATE INDEX messages_body_tsv_idx ON messages USING GIN (body_tsv);
