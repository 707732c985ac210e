-- The handoff that holds, its history: one row per released hold (the conversation row keeps
-- only the latest), so `manychat-agent report` can count each week's releases by reason and how
-- long a person had the conversation. Written in the same statement as the release on the
-- conversation row. Contact data: erased with the contact.
CREATE TABLE hold_releases (
    id              BIGSERIAL   PRIMARY KEY,
    conversation_id UUID        NOT NULL REFERENCES conversations (id),
    held_since      TIMESTAMPTZ NOT NULL, -- the handoff that began the hold
    released_at     TIMESTAMPTZ NOT NULL,
    reason          TEXT        NOT NULL  -- hold_expired, tag_removed, released
);
CREATE INDEX hold_releases_released_at ON hold_releases (released_at);
CREATE INDEX hold_releases_conversation ON hold_releases (conversation_id);
