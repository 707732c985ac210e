-- When a loaded config last used each vector of the semantic search (KNOWLEDGE_EMBEDDINGS), in
-- milliseconds, as `EmbeddingStore` sets it (a vector saved, or read for a config snapshot's
-- load). The hourly housekeeping deletes the vectors no loaded config has used for 30 days
-- (`embeddings_used_at` finds them). Rows stored before this column start from `created_at`;
-- the DEFAULT only lets SQLite add a NOT NULL column (every insert gives the time).
ALTER TABLE embeddings ADD COLUMN used_at INTEGER NOT NULL DEFAULT 0;
UPDATE embeddings SET used_at = created_at;
CREATE INDEX embeddings_used_at ON embeddings (used_at);
