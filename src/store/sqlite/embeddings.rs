//! SQLite: the knowledge's stored vectors (`EmbeddingStore`).

use super::*;
use crate::store::embeddings::{PRUNE_BATCH, vector_bytes, vector_from_bytes};

/// One vector by its key (the primary key serves it).
const EMBEDDING: &str = "SELECT vector FROM embeddings WHERE model = ? AND content_hash = ?";

/// A new vector, created and used at the same time; one already stored is kept as it is.
const SAVE_EMBEDDING: &str = "INSERT INTO embeddings (model, content_hash, vector, created_at, \
    used_at) VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (model, content_hash) DO NOTHING";

/// One vector marked used at `?3`, unless it was marked later.
const TOUCH_EMBEDDING: &str = "UPDATE embeddings SET used_at = ?3 \
    WHERE model = ?1 AND content_hash = ?2 AND used_at < ?3";

/// Up to `?2` vectors, of any model, last used before `?1` (`embeddings_used_at` finds them).
pub(super) const PRUNE_EMBEDDINGS: &str = "DELETE FROM embeddings WHERE (model, content_hash) IN \
    (SELECT model, content_hash FROM embeddings WHERE used_at < ?1 LIMIT ?2)";

/// Hashes marked per job, so one load's marking never holds the database thread for long.
const TOUCH_BATCH: usize = 500;

#[async_trait]
impl EmbeddingStore for SqliteStore {
    async fn embeddings(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>> {
        let model = model.to_owned();
        let hashes = hashes.to_vec();
        self.read(move |conn| {
            let mut found = Vec::new();
            let mut statement = conn.prepare_cached(EMBEDDING)?;
            for hash in hashes {
                let bytes: Option<Vec<u8>> = statement
                    .query_row(params![model, hash], |row| row.get(0))
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(e),
                    })?;
                if let Some(bytes) = bytes {
                    found.push((hash, vector_from_bytes(&bytes)?));
                }
            }
            Ok(found)
        })
        .await
    }

    async fn save_embeddings(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
        at: DateTime<Utc>,
    ) -> Result<()> {
        let model = model.to_owned();
        let rows: Vec<(String, Vec<u8>)> = vectors
            .iter()
            .map(|(hash, v)| (hash.clone(), vector_bytes(v)))
            .collect();
        self.write(move |conn| {
            let mut statement = conn.prepare_cached(SAVE_EMBEDDING)?;
            for (hash, bytes) in &rows {
                statement.execute(params![model, hash, bytes, ms(at)])?;
            }
            Ok(())
        })
        .await
    }

    async fn touch_embeddings(
        &self,
        model: &str,
        hashes: &[String],
        at: DateTime<Utc>,
    ) -> Result<()> {
        for chunk in hashes.chunks(TOUCH_BATCH) {
            let model = model.to_owned();
            let chunk = chunk.to_vec();
            self.write(move |conn| {
                let mut statement = conn.prepare_cached(TOUCH_EMBEDDING)?;
                for hash in &chunk {
                    statement.execute(params![model, hash, ms(at)])?;
                }
                Ok(())
            })
            .await?;
        }
        Ok(())
    }

    async fn prune_embeddings(&self, older_than: DateTime<Utc>) -> Result<u64> {
        let before = ms(older_than);
        let mut deleted = 0;
        loop {
            let batch = self
                .write(move |conn| {
                    let changed = conn
                        .prepare_cached(PRUNE_EMBEDDINGS)?
                        .execute(params![before, PRUNE_BATCH])?;
                    Ok(changed as u64)
                })
                .await?;
            deleted += batch;
            if batch < PRUNE_BATCH as u64 {
                return Ok(deleted);
            }
        }
    }
}
