-- The style of an own text status (background colour, font), as posted: `GET /status` returns them, as
-- OpenWA's status records carry them. NULL for media statuses, received ones and posts without a style.
ALTER TABLE status_updates ADD COLUMN background_color TEXT;
ALTER TABLE status_updates ADD COLUMN font BIGINT;
