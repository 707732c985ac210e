-- The turn's write and read paths made leaner (docs/PERFORMANCE.md).
--
-- `conversations_last_message_at` was never used: `tokens backfill` filters on
-- COALESCE(last_message_at, created_at), which no index on the column serves, while every
-- contact message rewrote an entry in it.
DROP INDEX IF EXISTS conversations_last_message_at;

-- The counters are looked up only by their primary key: stored WITHOUT ROWID, each update
-- touches one B-tree instead of a table and its key index.
CREATE TABLE budget_counters_new (
    day      TEXT    PRIMARY KEY NOT NULL,                     -- YYYY-MM-DD (UTC)
    tokens   INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL    NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO budget_counters_new (day, tokens, cost_usd)
    SELECT day, tokens, cost_usd FROM budget_counters;
DROP TABLE budget_counters;
ALTER TABLE budget_counters_new RENAME TO budget_counters;

CREATE TABLE rate_counters_new (
    subscriber_id TEXT    NOT NULL,
    window_start  INTEGER NOT NULL,
    count         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subscriber_id, window_start)
) WITHOUT ROWID;
INSERT INTO rate_counters_new (subscriber_id, window_start, count)
    SELECT subscriber_id, window_start, count FROM rate_counters;
DROP TABLE rate_counters;
ALTER TABLE rate_counters_new RENAME TO rate_counters;

-- History and the turn cap read a conversation's newest turns by (created_at, seq): with seq in
-- the index they are read in index order and stop at their LIMIT, with no sort, however long
-- the conversation.
DROP INDEX IF EXISTS turns_conversation_created;
CREATE INDEX turns_conversation_created ON turns (conversation_id, created_at, seq);
