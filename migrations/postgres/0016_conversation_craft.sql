-- 013: an agent turn whose reply repeated an earlier agent message records it
-- (`duplicate_replaced`: the closer was sent instead; `duplicate_detected`: sent as it was).
ALTER TABLE turns ADD COLUMN duplicate TEXT;

-- 031: the window-closing flow, sent once per contact ever. One row per conversation (it
-- survives idle resets): `running` while a worker holds it, `retry` after a failed send,
-- `sent`, `given_up` (the window closed while the send kept failing; counts as sent) or
-- `skipped` with its reason. A `contact_replied` skip deletes the row: the contact is due again.
CREATE TABLE window_closings (
    conversation_id UUID        PRIMARY KEY REFERENCES conversations (id),
    status          TEXT        NOT NULL,
    reason          TEXT,
    last_inbound_at TIMESTAMPTZ NOT NULL,
    claimed_at      TIMESTAMPTZ NOT NULL,
    attempts        INTEGER     NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX window_closings_retry ON window_closings (updated_at) WHERE status = 'retry';

-- The worker looks for contacts whose last message is 1380 to 1440 minutes old.
CREATE INDEX conversations_last_message_at ON conversations (last_message_at);
