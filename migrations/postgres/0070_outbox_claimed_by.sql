-- Who claimed a delivering attempt (the claimer's NODE_ID): a process restarted under the same id releases
-- the attempts its past life died in at boot, instead of waiting out WEBHOOK_TIMEOUT + OUTBOX_STALE_MS.
ALTER TABLE webhook_outbox_events ADD COLUMN claimed_by TEXT;
