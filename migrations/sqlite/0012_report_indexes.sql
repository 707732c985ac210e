-- Issue 18: `manychat-agent report` reads a week of turns at a time; this index finds them by
-- age instead of scanning every turn the store ever recorded.
CREATE INDEX turns_created ON turns (created_at);
