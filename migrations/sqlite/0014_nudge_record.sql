-- 025: one *pending* nudge per conversation, and every other row kept as the record. The
-- conversation's UNIQUE key made scheduling replace a cancelled, sent or skipped row; it is
-- now a unique index on pending rows only, so scheduling replaces only a pending nudge and a
-- settled one stays. SQLite cannot drop a column constraint: the table is rebuilt, every row
-- copied with its id (AUTOINCREMENT's counter is carried over, so no id is reused).
CREATE TABLE nudges_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT    NOT NULL REFERENCES conversations (id),
    delay_id        TEXT    NOT NULL,
    due_at          INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    reason          TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    scheduled_at    INTEGER,
    claimed_at      INTEGER
);
INSERT INTO nudges_new (id, conversation_id, delay_id, due_at, status, reason, created_at,
                        updated_at, scheduled_at, claimed_at)
    SELECT id, conversation_id, delay_id, due_at, status, reason, created_at, updated_at,
           scheduled_at, claimed_at
    FROM nudges ORDER BY id;
DROP TABLE nudges;
ALTER TABLE nudges_new RENAME TO nudges;
CREATE UNIQUE INDEX nudges_one_pending ON nudges (conversation_id) WHERE status = 'pending';
CREATE INDEX nudges_conversation ON nudges (conversation_id, id);
CREATE INDEX nudges_status_due ON nudges (status, due_at);
CREATE INDEX nudges_pending_due ON nudges (due_at) WHERE status = 'pending';
CREATE INDEX nudges_running_claimed ON nudges (claimed_at) WHERE status = 'running';
