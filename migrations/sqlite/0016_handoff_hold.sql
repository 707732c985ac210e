-- The handoff that holds: a conversation is held for a person from its last handoff
-- (`escalated_at`) for `handoff.holdHours`, unless released since. The release (its time and
-- reason: hold_expired, tag_removed, released) lives on the conversation row, so every replica
-- and the CLI see it; `hold_note_due` is set by a release until the first turn after it has told
-- the model that a person had the conversation.
ALTER TABLE conversations ADD COLUMN hold_released_at INTEGER;
ALTER TABLE conversations ADD COLUMN hold_release_reason TEXT;
ALTER TABLE conversations ADD COLUMN hold_note_due INTEGER NOT NULL DEFAULT 0;
