-- `conversations_last_message_at` was never used: `tokens backfill` filters on
-- COALESCE(last_message_at, created_at), which no index on the column serves, while every
-- contact message rewrote an entry in it.
DROP INDEX IF EXISTS conversations_last_message_at;

-- History and the turn cap read a conversation's newest turns by (created_at, seq): with seq in
-- the index they are read in index order and stop at their LIMIT, with no sort, however long
-- the conversation.
DROP INDEX IF EXISTS turns_conversation_created;
CREATE INDEX turns_conversation_created ON turns (conversation_id, created_at, seq);
