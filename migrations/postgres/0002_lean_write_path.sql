-- `conversations_last_message_at` was never used: `tokens backfill` filters on
-- COALESCE(last_message_at, created_at), which no index on the column serves, while every
-- contact message rewrote an entry in it.
DROP INDEX IF EXISTS conversations_last_message_at;
