-- The owner's console pages read by keyset, through an index each: the recent conversations
-- (newest last message first, ties by id) and the contacts held now (newest handoff first).
CREATE INDEX conversations_recent ON conversations (last_message_at, id);
CREATE INDEX conversations_escalated_at ON conversations (escalated_at);
