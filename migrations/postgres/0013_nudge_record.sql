-- 025: one *pending* nudge per conversation, and every other row kept as the record. The
-- conversation's UNIQUE key made scheduling replace a cancelled, sent or skipped row; it is
-- now a unique index on pending rows only, so scheduling replaces only a pending nudge and a
-- settled one stays. Every existing row is kept as it is.
ALTER TABLE nudges DROP CONSTRAINT nudges_conversation_id_key;
CREATE UNIQUE INDEX nudges_one_pending ON nudges (conversation_id) WHERE status = 'pending';
CREATE INDEX nudges_conversation ON nudges (conversation_id, id);
