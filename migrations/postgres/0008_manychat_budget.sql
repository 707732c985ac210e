-- Issue 21: one ManyChat budget per account, shared by every replica.
--
-- manychat_rate_bucket holds the one GCRA state of the account's request bucket: the theoretical
-- arrival time of the next request. manychat_take_slot() takes a slot or says how long until one
-- is free, in one statement (one round trip on the hot path). The row lock serialises replicas;
-- the clock is read after the lock is held, so a waiter never computes with a stale time, and
-- the database's clock is the only one consulted, so replicas' clock skew does not matter.
CREATE TABLE manychat_rate_bucket (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    theoretical_arrival TIMESTAMPTZ NOT NULL
);

INSERT INTO manychat_rate_bucket (id, theoretical_arrival) VALUES (1, 'epoch');

-- Returns 0 when a slot was taken, else the seconds to wait before asking again (nothing taken).
CREATE FUNCTION manychat_take_slot(emission_interval INTERVAL, burst INTEGER)
RETURNS DOUBLE PRECISION
LANGUAGE plpgsql
AS $$
DECLARE
    arrival TIMESTAMPTZ;
    now_at TIMESTAMPTZ;
    tolerance INTERVAL := emission_interval * (burst - 1);
BEGIN
    SELECT theoretical_arrival INTO arrival FROM manychat_rate_bucket WHERE id = 1 FOR UPDATE;
    now_at := clock_timestamp();
    arrival := greatest(arrival, now_at);
    IF arrival - now_at <= tolerance THEN
        UPDATE manychat_rate_bucket SET theoretical_arrival = arrival + emission_interval
        WHERE id = 1;
        RETURN 0;
    END IF;
    RETURN extract(epoch FROM (arrival - tolerance - now_at));
END;
$$;

-- sendFlow triggers per contact, for ManyChat's limit of 100 per contact per hour. Rows older
-- than an hour, every contact's, are deleted whenever a trigger is counted.
CREATE TABLE manychat_flow_sends (
    subscriber_id TEXT NOT NULL,
    sent_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX manychat_flow_sends_by_contact ON manychat_flow_sends (subscriber_id, sent_at);

CREATE INDEX manychat_flow_sends_by_time ON manychat_flow_sends (sent_at);
