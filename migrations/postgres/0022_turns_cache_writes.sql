-- The input tokens a turn's model calls wrote to the provider's prompt cache (Anthropic bills
-- them at 1.25x its input rate), beside `cached_tokens` (the ones read from it). Turns
-- recorded before this column hold 0: their writes were not counted.
ALTER TABLE turns ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
