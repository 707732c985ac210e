-- Postgres schema (SYSTEM 8). Same tables and meaning as migrations/sqlite; native types.

CREATE TABLE conversations (
    id                  UUID        PRIMARY KEY,
    subscriber_id       TEXT        NOT NULL UNIQUE,
    channel             TEXT        NOT NULL,
    turn_count          BIGINT      NOT NULL DEFAULT 0,
    escalated_at        TIMESTAMPTZ,
    last_message_at     TIMESTAMPTZ,
    token_hash          TEXT,
    previous_token_hash TEXT,
    token_issued_at     TIMESTAMPTZ,
    token_generation    BIGINT      NOT NULL DEFAULT 0,
    offering            TEXT,
    opening_sent_at     TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);

-- `tokens backfill` looks for recent contacts without a token.
CREATE INDEX conversations_last_message_at ON conversations (last_message_at);

-- Monotonic per store; orders turns written in the same millisecond.
CREATE SEQUENCE turns_seq;

CREATE TABLE turns (
    id              BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq             BIGINT      NOT NULL DEFAULT nextval('turns_seq'),
    conversation_id UUID        NOT NULL REFERENCES conversations (id),
    role            TEXT        NOT NULL CHECK (role IN ('user', 'agent')),
    text            TEXT        NOT NULL,
    outcome         TEXT,
    model           TEXT,
    bound           BOOLEAN     NOT NULL,
    -- 012: NULL when no tool was offered, '[]' when offered and none chosen.
    actions         JSONB,
    reads           BIGINT      NOT NULL DEFAULT 0,
    input_tokens    BIGINT      NOT NULL DEFAULT 0,
    output_tokens   BIGINT      NOT NULL DEFAULT 0,
    cached_tokens   BIGINT      NOT NULL DEFAULT 0,
    cost_usd        DOUBLE PRECISION NOT NULL DEFAULT 0,
    latency_ms      BIGINT      NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL
);

ALTER SEQUENCE turns_seq OWNED BY turns.seq;

CREATE INDEX turns_conversation_created ON turns (conversation_id, created_at);

CREATE TABLE outbox (
    id              BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id UUID        NOT NULL REFERENCES conversations (id),
    subscriber_id   TEXT        NOT NULL,
    kind            TEXT        NOT NULL CHECK (kind IN ('reply', 'contact_token')),
    payload         JSONB       NOT NULL,
    status          TEXT        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'delivering', 'delivered', 'failed')),
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    last_error      TEXT,
    lease_until     TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    delivered_at    TIMESTAMPTZ,
    -- When the row was dead-lettered (operators only; not part of `OutboxRow`).
    failed_at       TIMESTAMPTZ
);

CREATE INDEX outbox_status_due ON outbox (status, next_attempt_at);
CREATE INDEX outbox_conversation ON outbox (conversation_id, id);

-- 025: one pending nudge per conversation. Schema only for now.
CREATE TABLE nudges (
    id              BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id UUID        NOT NULL UNIQUE REFERENCES conversations (id),
    delay_id        TEXT        NOT NULL,
    due_at          TIMESTAMPTZ NOT NULL,
    status          TEXT        NOT NULL,
    reason          TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX nudges_status_due ON nudges (status, due_at);

CREATE TABLE budget_counters (
    day      DATE             PRIMARY KEY,
    tokens   BIGINT           NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0
);

CREATE TABLE rate_counters (
    subscriber_id TEXT        NOT NULL,
    window_start  TIMESTAMPTZ NOT NULL,
    count         BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (subscriber_id, window_start)
);
