-- The contact fence's nonce, one per conversation (C4): the history is fenced with the same
-- nonce on every turn, so a contact's prompt repeats its earlier turns byte for byte and the
-- providers' prompt caches can reuse them. Written on the conversation's first turn, and again
-- (a new nonce) when the contact's text holds the current one. Never shown to anyone; erased
-- with the contact's row.
ALTER TABLE conversations ADD COLUMN fence_nonce TEXT;
