//! PostgreSQL: the knowledge's stored vectors (`EmbeddingStore`).

use super::*;
use crate::store::embeddings::{vector_bytes, vector_from_bytes};

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
                "INSERT INTO embeddings (model, content_hash, vector, created_at) \
                 SELECT $1, hash, vector, $4 FROM UNNEST($2::text[], $3::bytea[]) AS t(hash, vector) \
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
}
