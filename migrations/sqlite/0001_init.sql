-- SQLite schema (SYSTEM 8). Timestamps are INTEGER unix milliseconds (UTC): sortable and
-- compared exactly. JSON is TEXT written by serde_json. Booleans are 0/1.

CREATE TABLE conversations (
    id                  TEXT    PRIMARY KEY NOT NULL,          -- random UUID, hyphenated
    subscriber_id       TEXT    NOT NULL UNIQUE,
    channel             TEXT    NOT NULL,
    turn_count          INTEGER NOT NULL DEFAULT 0,
    escalated_at        INTEGER,
    last_message_at     INTEGER,
    token_hash          TEXT,
    previous_token_hash TEXT,
    token_issued_at     INTEGER,
    token_generation    INTEGER NOT NULL DEFAULT 0,
    offering            TEXT,
    opening_sent_at     INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);

-- `tokens backfill` looks for recent contacts without a token.
CREATE INDEX conversations_last_message_at ON conversations (last_message_at);

CREATE TABLE turns (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Monotonic per store; orders turns written in the same millisecond.
    seq             INTEGER NOT NULL UNIQUE,
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

CREATE INDEX turns_conversation_created ON turns (conversation_id, created_at);

CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT    NOT NULL REFERENCES conversations (id),
    subscriber_id   TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('reply', 'contact_token')),
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

CREATE INDEX outbox_status_due ON outbox (status, next_attempt_at);
CREATE INDEX outbox_conversation ON outbox (conversation_id, id);

-- 025: one pending nudge per conversation. Schema only for now.
CREATE TABLE nudges (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT    NOT NULL UNIQUE REFERENCES conversations (id),
    delay_id        TEXT    NOT NULL,
    due_at          INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    reason          TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE INDEX nudges_status_due ON nudges (status, due_at);

CREATE TABLE budget_counters (
    day      TEXT    PRIMARY KEY NOT NULL,                     -- YYYY-MM-DD (UTC)
    tokens   INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL    NOT NULL DEFAULT 0
);

CREATE TABLE rate_counters (
    subscriber_id TEXT    NOT NULL,
    window_start  INTEGER NOT NULL,
    count         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subscriber_id, window_start)
);
