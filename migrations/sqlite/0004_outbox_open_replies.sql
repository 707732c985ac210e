-- A contact's reply rows still to deliver, found without reading the rows already delivered:
-- every turn asks whether a reply is queued for its contact (3.3's silent response), and the
-- outbox worker asks it of every reply it claims (no overtaking). The outbox keeps every row it
-- ever delivered, so through `outbox_conversation` these questions grew with the contact's
-- history; this index holds only the open reply rows.
CREATE INDEX outbox_open_replies ON outbox (conversation_id, id)
    WHERE kind = 'reply' AND status IN ('pending', 'delivering');
