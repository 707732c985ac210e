-- Learning from what sold (031): the weekly analyst runs, the proposals a person reviews, the
-- immutable playbook versions (one active at most) and the eval records the activation gate
-- reads. No row holds transcript text, a subscriber id or a conversation id: proposals cite
-- turn ids only. `turns.playbook_version` is the content hash of the playbook a model-written
-- turn was prompted with.

-- The weekly claim: one unforced run per ISO week (`2026-W49`), across replicas; `--force`
-- adds another.
CREATE TABLE learning_runs (
    id                  BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    week                TEXT    NOT NULL,
    forced              BOOLEAN NOT NULL DEFAULT FALSE,
    status              TEXT    NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'completed', 'insufficient',
                                          'skipped_budget', 'failed')),
    converted_count     BIGINT  NOT NULL DEFAULT 0,
    not_converted_count BIGINT  NOT NULL DEFAULT 0,
    cost_usd            NUMERIC(12, 6) NOT NULL DEFAULT 0,
    -- Why a run failed, in the service's own words (never the analyst's answer).
    reason              TEXT,
    started_at          TIMESTAMPTZ NOT NULL,
    finished_at         TIMESTAMPTZ
);
CREATE UNIQUE INDEX learning_runs_week_uq ON learning_runs (week) WHERE forced = FALSE;

CREATE TABLE insight_proposals (
    id                  BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id              BIGINT  NOT NULL REFERENCES learning_runs (id) ON DELETE CASCADE,
    text                TEXT    NOT NULL,
    rationale           TEXT    NOT NULL,
    converted_count     BIGINT  NOT NULL,
    not_converted_count BIGINT  NOT NULL,
    turn_ids            JSONB   NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'approved', 'rejected')),
    reviewed_at         TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX insight_proposals_status ON insight_proposals (status, id);

CREATE TABLE playbook_versions (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    content_hash TEXT    NOT NULL UNIQUE,
    insights     JSONB   NOT NULL,
    active       BOOLEAN NOT NULL DEFAULT FALSE,
    -- Set the first time the version goes live and kept: a version active before is a rollback.
    activated_at TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX playbook_versions_one_active ON playbook_versions (active) WHERE active;

-- `playbook_hash` is '' for the no-playbook baseline.
CREATE TABLE eval_records (
    id            BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    playbook_hash TEXT    NOT NULL,
    suite_hash    TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    outcomes      JSONB   NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX eval_records_playbook ON eval_records (playbook_hash, suite_hash, id);

ALTER TABLE turns ADD COLUMN playbook_version TEXT;
