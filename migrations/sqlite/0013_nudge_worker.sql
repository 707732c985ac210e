-- 025: the nudge worker. The table kept one row per conversation (its UNIQUE key is the one
-- pending nudge the upsert replaces); the worker needs when a nudge was scheduled (the
-- `escalated` check), when it was claimed (a row left `running` by a dead process is marked
-- `lost`), and a claim index that costs the due rows, not the table.
ALTER TABLE nudges ADD COLUMN scheduled_at INTEGER;
ALTER TABLE nudges ADD COLUMN claimed_at INTEGER;
UPDATE nudges SET scheduled_at = created_at WHERE scheduled_at IS NULL;
CREATE INDEX nudges_pending_due ON nudges (due_at) WHERE status = 'pending';
CREATE INDEX nudges_running_claimed ON nudges (claimed_at) WHERE status = 'running';
