-- Durable promises (issue 13): why a turn escalated, and the handoff as an outbox row.
--
-- `escalation_reason` names why a turn was handed to a person (a pre-model check, the model,
-- a guardrail, an error, an abort, load shedding, …); NULL when it did not escalate. It is set
-- on the agent turn, or on the contact's message when no agent turn is recorded (an abort).
ALTER TABLE turns ADD COLUMN escalation_reason TEXT;

-- A `handoff` row performs the tenant's handoff (tag and/or flow) like a reply is delivered:
-- retried with backoff, taken over after a crash, never before the text it follows.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('reply', 'contact_token', 'handoff'));
