-- Every decision of the learning review (031), with who made it and when: a proposal approved
-- or rejected (with the reviewer's reason, cleaned of links, emails and phone numbers), an
-- insight retired, a version taken live through the eval gate or rolled back. Written in the
-- same transaction as the decision itself, by the `insights` commands (`cli`) and the owner's
-- console (`console`) alike. No row holds transcript text or a subscriber id.
CREATE TABLE learning_decisions (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    decision     TEXT    NOT NULL
                 CHECK (decision IN ('approved', 'rejected', 'retired', 'activated',
                                     'rolled_back')),
    proposal_id  BIGINT  REFERENCES insight_proposals (id) ON DELETE SET NULL,
    -- The version a review made, or the version taken live.
    version_hash TEXT,
    -- A retired insight's place in the playbook it left (1 = first).
    place        BIGINT,
    reason       TEXT,
    decided_by   TEXT    NOT NULL,
    decided_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX learning_decisions_proposal ON learning_decisions (proposal_id);
