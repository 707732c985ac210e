-- A replica's death costs its contacts nothing: the promise of a reply (a pending `reply` row
-- holding the escalation copy) names the process that wrote it (`owner`), and every `serve`
-- process keeps a lease on its own row in `replicas` while it runs. A promise whose owner's
-- lease lapsed is claimed by a surviving replica (the claim sets `owner` to itself, under the
-- row's lock, so two survivors never both take it) and its turn runs again while its abort
-- window lasts. NULL: written before this migration, or by no turn; never taken over.
ALTER TABLE outbox ADD COLUMN owner UUID;

CREATE TABLE replicas (
    holder      UUID        PRIMARY KEY,
    lease_until TIMESTAMPTZ NOT NULL
);
