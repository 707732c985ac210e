-- The columns PostgreSQL replicas use to take over a dead replica's promises. One SQLite process
-- owns its database and runs its interrupted promises again at start, so it never writes here;
-- they exist so that both backends have the same outbox.
ALTER TABLE outbox ADD COLUMN owner TEXT;

CREATE TABLE replicas (
    holder      TEXT    PRIMARY KEY,
    lease_until INTEGER NOT NULL
);
