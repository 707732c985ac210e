//! PostgreSQL: the sales record and the opening's claim (`SalesStore`).

use super::*;

#[async_trait]
impl SalesStore for PgStore {
    async fn sales_record(&self, conversation_id: ConversationId) -> Result<SalesRecord> {
        let offering: Option<(Option<String>, Option<DateTime<Utc>>)> =
            sqlx::query_as("SELECT offering, offering_at FROM conversations WHERE id = $1")
                .bind(conversation_id)
                .fetch_optional(&self.pool)
                .await?;
        let rows: Vec<(DateTime<Utc>, Json<Value>)> = sqlx::query_as(
            "SELECT created_at, actions FROM turns WHERE conversation_id = $1 \
             AND role = 'agent' AND bound AND actions IS NOT NULL AND actions <> '[]'::jsonb \
             ORDER BY created_at, seq",
        )
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(SalesRecord {
            offering: match offering {
                Some((Some(value), Some(at))) => Some((value, at)),
                _ => None,
            },
            actions: rows
                .into_iter()
                .map(|(at, Json(actions))| ActionRecord { at, actions })
                .collect(),
        })
    }

    async fn set_offering(
        &self,
        id: ConversationId,
        offering: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let done = sqlx::query(
            "UPDATE conversations SET offering = $1, offering_at = $2, updated_at = $2 \
             WHERE id = $3",
        )
        .bind(offering)
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        changed(done, "conversation")
    }

    async fn claim_opening(&self, id: ConversationId, at: DateTime<Utc>) -> Result<bool> {
        let claimed = sqlx::query(
            "UPDATE conversations SET opening_sent_at = $1, updated_at = $1 \
             WHERE id = $2 AND opening_sent_at IS NULL",
        )
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }
}
