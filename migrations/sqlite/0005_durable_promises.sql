-- Durable promises (issue 13): why a turn escalated, and the handoff as an outbox row.
--
-- `escalation_reason` names why a turn was handed to a person (a pre-model check, the model,
-- a guardrail, an error, an abort, load shedding, …); NULL when it did not escalate. It is set
-- on the agent turn, or on the contact's message when no agent turn is recorded (an abort).
ALTER TABLE turns ADD COLUMN escalation_reason TEXT;

-- A `handoff` row performs the tenant's handoff (tag and/or flow) like a reply is delivered:
-- retried with backoff, taken over after a crash, never before the text it follows. SQLite
-- cannot change a CHECK constraint, so the table is rebuilt with the new kind allowed.
CREATE TABLE outbox_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT    NOT NULL REFERENCES conversations (id),
    subscriber_id   TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('reply', 'contact_token', 'handoff')),
    payload         TEXT    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'pending'
                            CHECK (status IN ('pending', 'delivering', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    -- When the row was dead-lettered (operators only; not part of `OutboxRow`).
    failed_at       INTEGER
);
INSERT INTO outbox_new (id, conversation_id, subscriber_id, kind, payload, status, attempts,
                        next_attempt_at, last_error, lease_until, created_at, delivered_at,
                        failed_at)
    SELECT id, conversation_id, subscriber_id, kind, payload, status, attempts,
           next_attempt_at, last_error, lease_until, created_at, delivered_at, failed_at
    FROM outbox ORDER BY id;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_status_due ON outbox (status, next_attempt_at);
CREATE INDEX outbox_conversation ON outbox (conversation_id, id);
CREATE INDEX outbox_open_replies ON outbox (conversation_id, id)
    WHERE kind = 'reply' AND status IN ('pending', 'delivering');
