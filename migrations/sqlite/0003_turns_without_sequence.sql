-- The turns table rebuilt for a cheaper write path (docs/PERFORMANCE.md).
--
-- Turns are never deleted, so a plain INTEGER PRIMARY KEY never reuses an id: AUTOINCREMENT's
-- `sqlite_sequence` row, read and rewritten by every insert, bought nothing. `seq` now equals
-- `id` (both are the next integer after the largest id, chosen inside the writer's
-- transaction), so the unique index that kept `seq` apart is gone too. Every earlier row
-- already had `seq = id`: both were the next integer on every insert.
--
-- The conversation index carries `role` and `bound`, so the turn cap's read (a contact's last
-- bound messages) is answered from the index alone.
CREATE TABLE turns_new (
    id              INTEGER PRIMARY KEY,
    -- Equal to `id`; orders turns written in the same millisecond.
    seq             INTEGER NOT NULL,
    conversation_id TEXT    NOT NULL REFERENCES conversations (id),
    role            TEXT    NOT NULL CHECK (role IN ('user', 'agent')),
    text            TEXT    NOT NULL,
    outcome         TEXT,
    model           TEXT,
    bound           INTEGER NOT NULL CHECK (bound IN (0, 1)),
    -- 012: NULL when no tool was offered, '[]' when offered and none chosen.
    actions         TEXT,
    reads           INTEGER NOT NULL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cached_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL    NOT NULL DEFAULT 0,
    latency_ms      INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL
);
INSERT INTO turns_new (id, seq, conversation_id, role, text, outcome, model, bound, actions,
                       reads, input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms,
                       created_at)
    SELECT id, id, conversation_id, role, text, outcome, model, bound, actions, reads,
           input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at
    FROM turns ORDER BY id;
DROP TABLE turns;
ALTER TABLE turns_new RENAME TO turns;
DELETE FROM sqlite_sequence WHERE name = 'turns';
CREATE INDEX turns_conversation_created ON turns (conversation_id, created_at, seq, role, bound);
