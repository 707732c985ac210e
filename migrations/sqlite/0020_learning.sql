-- Learning from what sold (031): the weekly analyst runs, the proposals a person reviews, the
-- immutable playbook versions (one active at most) and the eval records the activation gate
-- reads. No row holds transcript text, a subscriber id or a conversation id: proposals cite
-- turn ids only. `turns.playbook_version` is the content hash of the playbook a model-written
-- turn was prompted with.

-- The weekly claim: one unforced run per ISO week (`2026-W49`), across processes; `--force`
-- adds another.
CREATE TABLE learning_runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    week                TEXT    NOT NULL,
    forced              INTEGER NOT NULL DEFAULT 0 CHECK (forced IN (0, 1)),
    status              TEXT    NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'completed', 'insufficient',
                                          'skipped_budget', 'failed')),
    converted_count     INTEGER NOT NULL DEFAULT 0,
    not_converted_count INTEGER NOT NULL DEFAULT 0,
    cost_usd            REAL    NOT NULL DEFAULT 0,
    -- Why a run failed, in the service's own words (never the analyst's answer).
    reason              TEXT,
    started_at          INTEGER NOT NULL,
    finished_at         INTEGER
);
CREATE UNIQUE INDEX learning_runs_week_uq ON learning_runs (week) WHERE forced = 0;

CREATE TABLE insight_proposals (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id              INTEGER NOT NULL REFERENCES learning_runs (id) ON DELETE CASCADE,
    text                TEXT    NOT NULL,
    rationale           TEXT    NOT NULL,
    converted_count     INTEGER NOT NULL,
    not_converted_count INTEGER NOT NULL,
    turn_ids            TEXT    NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'approved', 'rejected')),
    reviewed_at         INTEGER,
    created_at          INTEGER NOT NULL
);
CREATE INDEX insight_proposals_status ON insight_proposals (status, id);

CREATE TABLE playbook_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    content_hash TEXT    NOT NULL UNIQUE,
    insights     TEXT    NOT NULL,
    active       INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
    -- Set the first time the version goes live and kept: a version active before is a rollback.
    activated_at INTEGER,
    created_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX playbook_versions_one_active ON playbook_versions (active) WHERE active = 1;

-- `playbook_hash` is '' for the no-playbook baseline.
CREATE TABLE eval_records (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    playbook_hash TEXT    NOT NULL,
    suite_hash    TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    outcomes      TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE INDEX eval_records_playbook ON eval_records (playbook_hash, suite_hash, id);

ALTER TABLE turns ADD COLUMN playbook_version TEXT;
