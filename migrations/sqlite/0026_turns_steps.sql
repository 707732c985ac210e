-- How many model calls (steps of the bounded tool loop) a model-written turn took. NULL on a
-- turn no model wrote, and on every turn recorded before this column.
ALTER TABLE turns ADD COLUMN steps INTEGER;
