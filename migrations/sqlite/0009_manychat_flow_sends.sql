-- Issue 21: sendFlow triggers per contact, for ManyChat's limit of 100 per contact per hour.
-- (SQLite serves one process: its ManyChat request bucket stays in memory.) Rows older than an
-- hour, every contact's, are deleted whenever a trigger is counted. sent_at is Unix milliseconds.
CREATE TABLE manychat_flow_sends (
    subscriber_id TEXT NOT NULL,
    sent_at INTEGER NOT NULL
);

CREATE INDEX manychat_flow_sends_by_contact ON manychat_flow_sends (subscriber_id, sent_at);

CREATE INDEX manychat_flow_sends_by_time ON manychat_flow_sends (sent_at);
