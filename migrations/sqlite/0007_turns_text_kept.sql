-- Retention (RETENTION_DAYS) empties the text of turns older than the period. This index holds
-- only the turns that still have text, by age, so each hourly pass reads just the turns it is
-- about to empty, never the ones it emptied before.
CREATE INDEX turns_text_kept ON turns (created_at) WHERE text <> '';
