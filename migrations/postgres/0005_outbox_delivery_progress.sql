-- How far a reply row's delivery got, so a retry resumes instead of starting over (issue 13,
-- item 5): `messages_delivered` counts the messages whose trigger ManyChat accepted (never sent
-- again); `trigger_timeouts` counts the triggers of the next message that got no answer (a
-- timeout or a cut-off response: ManyChat may have run them), so such a trigger is retried at
-- most once.
ALTER TABLE outbox ADD COLUMN messages_delivered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN trigger_timeouts INTEGER NOT NULL DEFAULT 0;
