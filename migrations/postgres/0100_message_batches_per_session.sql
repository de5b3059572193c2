-- A bulk batch's id is unique within its session only: another session may use the same batchId, and a
-- scoped key learns nothing of other sessions' batches from a duplicate refusal.
ALTER TABLE message_batches DROP CONSTRAINT message_batches_pkey;
ALTER TABLE message_batches ADD PRIMARY KEY (session_id, id);
