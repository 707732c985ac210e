//! PostgreSQL: the knowledge's stored vectors (`EmbeddingStore`).

use super::*;
use crate::store::embeddings::{PRUNE_BATCH, vector_bytes, vector_from_bytes};

/// Hashes asked for in one statement.
const CHUNK: usize = 1_000;

#[async_trait]
impl EmbeddingStore for PgStore {
    async fn embeddings(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>> {
        let mut found = Vec::new();
        for chunk in hashes.chunks(CHUNK) {
            let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
                "SELECT content_hash, vector FROM embeddings \
                 WHERE model = $1 AND content_hash = ANY($2)",
            )
            .bind(model)
            .bind(chunk)
            .fetch_all(&self.pool)
            .await?;
            for (hash, bytes) in rows {
                found.push((hash, vector_from_bytes(&bytes)?));
            }
        }
        Ok(found)
    }

    async fn save_embeddings(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
        at: DateTime<Utc>,
    ) -> Result<()> {
        for chunk in vectors.chunks(CHUNK) {
            let hashes: Vec<&str> = chunk.iter().map(|(h, _)| h.as_str()).collect();
            let bytes: Vec<Vec<u8>> = chunk.iter().map(|(_, v)| vector_bytes(v)).collect();
            sqlx::query(
                "INSERT INTO embeddings (model, content_hash, vector, created_at, used_at) \
                 SELECT $1, hash, vector, $4, $4 \
                 FROM UNNEST($2::text[], $3::bytea[]) AS t(hash, vector) \
                 ON CONFLICT (model, content_hash) DO NOTHING",
            )
            .bind(model)
            .bind(&hashes)
            .bind(&bytes)
            .bind(to_millis(at))
            .execute(&self.pool)
            .await?;
        }
        Ok(())
    }

    async fn touch_embeddings(
        &self,
        model: &str,
        hashes: &[String],
        at: DateTime<Utc>,
    ) -> Result<()> {
        for chunk in hashes.chunks(CHUNK) {
            sqlx::query(
                "UPDATE embeddings SET used_at = $3 \
                 WHERE model = $1 AND content_hash = ANY($2) AND used_at < $3",
            )
            .bind(model)
            .bind(chunk)
            .bind(to_millis(at))
            .execute(&self.pool)
            .await?;
        }
        Ok(())
    }

    async fn prune_embeddings(&self, older_than: DateTime<Utc>) -> Result<u64> {
        let mut deleted = 0;
        loop {
            // `embeddings_used_at` finds the batch.
            let batch = sqlx::query(
                "DELETE FROM embeddings WHERE (model, content_hash) IN \
                 (SELECT model, content_hash FROM embeddings WHERE used_at < $1 LIMIT $2)",
            )
            .bind(to_millis(older_than))
            .bind(PRUNE_BATCH)
            .execute(&self.pool)
            .await?
            .rows_affected();
            deleted += batch;
            if batch < PRUNE_BATCH as u64 {
                return Ok(deleted);
            }
        }
    }
}
