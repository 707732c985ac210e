-- When a loaded config last used each vector of the semantic search (KNOWLEDGE_EMBEDDINGS), as
-- `EmbeddingStore` sets it (a vector saved, or read for a config snapshot's load). The hourly
-- housekeeping deletes the vectors no loaded config has used for 30 days
-- (`embeddings_used_at` finds them). Rows stored before this column start from `created_at`.
ALTER TABLE embeddings ADD COLUMN used_at TIMESTAMPTZ;
UPDATE embeddings SET used_at = created_at;
ALTER TABLE embeddings ALTER COLUMN used_at SET NOT NULL;
CREATE INDEX embeddings_used_at ON embeddings (used_at);
