-- The sales funnel (issue 14, 028): when `conversations.offering` was last set. The stored
-- offering comes from two places, a token-bound request and a performed write to the offering
-- field (recorded in `turns.actions`); the later of the two is the contact's offering, so the
-- time of the stored one is kept beside it.
ALTER TABLE conversations ADD COLUMN offering_at TIMESTAMPTZ;
