-- The business's own read tools (plugins.json): one entry per read a turn made, as
-- {"tool", "available", "ms"}; never the arguments or the answer. NULL: the turn made none.
ALTER TABLE turns ADD COLUMN plugin_reads TEXT;
