-- The table PostgreSQL replicas use to run one turn at a time per contact (issue 22). One
-- SQLite process orders its turns in memory and never writes here; the table exists so that
-- both backends have the same contact tables (`CONTACT_TABLES`, which `forget` erases).
CREATE TABLE turn_tickets (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT    NOT NULL REFERENCES conversations (id),
    holder          TEXT    NOT NULL,
    lease_until     INTEGER NOT NULL
);

CREATE INDEX turn_tickets_conversation ON turn_tickets (conversation_id, id);
