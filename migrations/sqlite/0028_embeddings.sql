-- Semantic search (KNOWLEDGE_EMBEDDINGS): one vector per embedding model and text, keyed by the
-- SHA-256 of the text the knowledge index holds (an offering's or a passage's), so a text is
-- embedded once whatever reloads follow. Catalog text only: no contact's row, no message.
-- `vector` is the model's floats, little-endian f32; `created_at` in milliseconds.
CREATE TABLE embeddings (
    model        TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    vector       BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (model, content_hash)
) WITHOUT ROWID;
