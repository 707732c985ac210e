//! SQLite: the sales record and the opening's claim (`SalesStore`).

use super::*;

/// The stored offering and its time.
pub(super) const SALES_OFFERING: &str =
    "SELECT offering, offering_at FROM conversations WHERE id = ?";

/// The action records of a conversation's bound agent turns (019: an unbound turn's writes
/// count within that turn only, never as the contact's record). Ordered by `created_at` only,
/// which the `(conversation_id, created_at)` index gives; turns of one millisecond are put in
/// `seq` order after the read, so the statement opens no temporary B-tree.
pub(super) const SALES_ACTIONS: &str = "SELECT created_at, seq, actions FROM turns \
    WHERE conversation_id = ? AND role = 'agent' AND bound = 1 AND actions IS NOT NULL \
    AND actions <> '[]' ORDER BY created_at";

/// 032 A: the opening's claim, one conditional update (see `Store::claim_opening`).
pub(super) const CLAIM_OPENING: &str = "UPDATE conversations SET opening_sent_at = ?, updated_at = ? \
    WHERE id = ? AND opening_sent_at IS NULL";

pub(super) fn sales_record_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
) -> Result<SalesRecord> {
    let id = IdText::of(conversation_id);
    let offering = query_one(conn, SALES_OFFERING, [&id], |row| {
        let value: Option<String> = row.get(0)?;
        let at: Option<i64> = row.get(1)?;
        Ok(match (value, opt_time(at)?) {
            (Some(value), Some(at)) => Some((value, at)),
            _ => None,
        })
    })?
    .flatten();
    let mut rows = query_all(conn, SALES_ACTIONS, [&id], |row| {
        let raw: String = row.get(2)?;
        Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, json(&raw)?))
    })?;
    rows.sort_by_key(|(at, seq, _)| (*at, *seq));
    let actions = rows
        .into_iter()
        .map(|(at, _, actions)| {
            Ok(ActionRecord {
                at: time(at)?,
                actions,
            })
        })
        .collect::<Result<_>>()?;
    Ok(SalesRecord { offering, actions })
}

#[async_trait]
impl SalesStore for SqliteStore {
    async fn sales_record(&self, conversation_id: ConversationId) -> Result<SalesRecord> {
        self.read(move |conn| sales_record_in(conn, conversation_id))
            .await
    }

    async fn set_offering(
        &self,
        id: ConversationId,
        offering: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let offering = offering.to_owned();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE conversations SET offering = ?, offering_at = ?, updated_at = ? \
                 WHERE id = ?",
                params![offering, ms(at), ms(at), IdText::of(id)],
                "conversation",
            )
        })
        .await
    }

    async fn claim_opening(&self, id: ConversationId, at: DateTime<Utc>) -> Result<bool> {
        self.write(move |conn| {
            let claimed = conn.prepare_cached(CLAIM_OPENING)?.execute(params![
                ms(at),
                ms(at),
                IdText::of(id)
            ])?;
            Ok(claimed == 1)
        })
        .await
    }
}
