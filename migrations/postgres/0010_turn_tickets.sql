-- One turn at a time per contact, across replicas, in arrival order (037, issue 22).
--
-- A turn takes a ticket when it arrives and runs when no earlier live ticket of its
-- conversation remains; it gives the ticket back when it has settled. Waiting and running hold
-- no database connection (a session advisory lock held for the turn pinned one pooled
-- connection per turn for the whole model call, and a burst ran the pool dry). A ticket's lease
-- is renewed by its process while the turn lasts; a dead replica's tickets lapse within seconds.
CREATE TABLE turn_tickets (
    id              BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id UUID        NOT NULL REFERENCES conversations (id),
    -- The process that holds it (a random id per store), whose renewals keep it alive.
    holder          UUID        NOT NULL,
    lease_until     TIMESTAMPTZ NOT NULL
);

CREATE INDEX turn_tickets_conversation ON turn_tickets (conversation_id, id);
CREATE INDEX turn_tickets_holder ON turn_tickets (holder);
