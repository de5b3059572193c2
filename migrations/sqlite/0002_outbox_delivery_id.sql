-- The delivery id (dlv_<uuid>) of an outbox row: generated when the row is first dispatched and kept across its
-- retries, so a receiver sees the same X-Wagate-Delivery-Id on every attempt of one dispatch.
ALTER TABLE webhook_outbox_events ADD COLUMN delivery_id TEXT;
