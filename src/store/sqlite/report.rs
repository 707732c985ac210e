//! SQLite: the report's aggregates (`ReportStore`), read at report time only.

use super::*;

#[async_trait]
impl ReportStore for SqliteStore {
    async fn sales_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &crate::store::SalesKeys,
    ) -> Result<crate::store::SalesCounts> {
        let (from, until, keys) = (ms(from), ms(until), keys.clone());
        self.read(move |conn| sales_aggregates_in(conn, from, until, &keys))
            .await
    }

    async fn report_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<crate::store::ReportAggregates> {
        let (from, until) = (ms(from), ms(until));
        self.read(move |conn| report_aggregates_in(conn, from, until))
            .await
    }

    async fn conversation_costs(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &crate::store::SalesKeys,
    ) -> Result<crate::store::ConversationCosts> {
        let (from, until, keys) = (ms(from), ms(until), keys.clone());
        self.read(move |conn| {
            let tally = action_tally_in(conn, from, until, Some(&keys))?;
            conversation_costs_in(conn, from, until, &tally)
        })
        .await
    }

    async fn report_week(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &crate::store::SalesKeys,
    ) -> Result<crate::store::ReportWeek> {
        let (from, until, keys) = (ms(from), ms(until), keys.clone());
        self.read(move |conn| report_week_in(conn, from, until, &keys))
            .await
    }
}

/// Contacts whose first turn is in `[?1, ?2)`: the period's contacts (through
/// `turns_created`) without an earlier turn (through `turns_conversation_created`).
pub(super) const REPORT_NEW_CONTACTS: &str = concat!(
    "SELECT COUNT(*) FROM \
     (SELECT DISTINCT conversation_id FROM turns WHERE created_at >= ?1 AND created_at < ?2 \
       AND conversation_id NOT IN (",
    test_conversations!(),
    ")) w WHERE NOT EXISTS (SELECT 1 FROM turns e \
                       WHERE e.conversation_id = w.conversation_id AND e.created_at < ?1)"
);

/// The period's turns by day, role, outcome, escalation reason and authorship.
pub(super) const REPORT_TURN_GROUPS: &str = concat!(
    "SELECT created_at / 86400000 AS day, role, outcome, \
     escalation_reason, model IS NOT NULL AS model_written, COUNT(*), SUM(reads), \
     SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) \
     FROM turns WHERE created_at >= ?1 AND created_at < ?2 AND conversation_id NOT IN (",
    test_conversations!(),
    ") GROUP BY day, role, outcome, escalation_reason, model_written ORDER BY day"
);

/// Inline answer times, each distinct value with its count.
pub(super) const REPORT_INLINE_LATENCIES: &str = concat!(
    "SELECT latency_ms, COUNT(*) FROM turns \
     WHERE created_at >= ?1 AND created_at < ?2 AND outcome = 'answered_inline' \
     AND conversation_id NOT IN (",
    test_conversations!(),
    ") GROUP BY latency_ms ORDER BY latency_ms"
);

/// The period's action records that hold an entry (through `turns_created`; an empty
/// record, a turn offered tools that chose none, is skipped unparsed), parsed and tallied in
/// the process (`ActionTally`): one parse per record serves both the actions table and the
/// sales counts. SQLite's JSON functions cost more than the whole row read: `json_each` then
/// `json_extract` per key parsed each entry again, and the two measures each made that pass.
/// A partial index on the turns holding a record was measured and saved nothing (reading the
/// week's rows is cheap next to parsing), so no write pays for one.
pub(super) const REPORT_ACTION_RECORDS: &str = concat!(
    "SELECT conversation_id, actions FROM turns \
     WHERE created_at >= ?1 AND created_at < ?2 AND actions IS NOT NULL AND actions <> '[]' \
     AND conversation_id NOT IN (",
    test_conversations!(),
    ")"
);

pub(super) fn action_tally_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    keys: Option<&crate::store::SalesKeys>,
) -> Result<crate::store::report::ActionTally> {
    let mut tally = crate::store::report::ActionTally::new(keys);
    let mut statement = conn.prepare_cached(REPORT_ACTION_RECORDS)?;
    let mut rows = statement.query(params![from, until])?;
    while let Some(row) = rows.next()? {
        // Both columns are TEXT; a value of another type holds no record to count.
        if let (Ok(conversation), Ok(record)) = (row.get_ref(0)?.as_str(), row.get_ref(1)?.as_str())
        {
            tally.add(conversation, record);
        }
    }
    Ok(tally)
}

pub(super) fn report_aggregates_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
) -> Result<crate::store::ReportAggregates> {
    let actions = action_tally_in(conn, from, until, None)?.actions();
    grouped_turns_in(conn, from, until, actions)
}

/// The period's grouped turn statements; `actions` from the period's [`action_tally_in`].
pub(super) fn grouped_turns_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    actions: Vec<crate::store::ActionCount>,
) -> Result<crate::store::ReportAggregates> {
    let new_contacts = query_all(conn, REPORT_NEW_CONTACTS, params![from, until], |r| {
        Ok(r.get::<_, i64>(0)?)
    })?
    .into_iter()
    .next()
    .unwrap_or(0);
    let turn_groups = query_all(conn, REPORT_TURN_GROUPS, params![from, until], |r| {
        Ok(crate::store::TurnGroup {
            day: crate::store::report::day_of_epoch_days(r.get(0)?),
            role: crate::store::report::role_of(&r.get::<_, String>(1)?),
            outcome: r.get(2)?,
            escalation_reason: r.get(3)?,
            model_written: r.get(4)?,
            turns: r.get(5)?,
            reads: r.get(6)?,
            input_tokens: r.get(7)?,
            output_tokens: r.get(8)?,
            cost_usd: r.get(9)?,
        })
    })?;
    let inline_latencies = query_all(conn, REPORT_INLINE_LATENCIES, params![from, until], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    Ok(crate::store::ReportAggregates {
        new_contacts,
        turn_groups,
        inline_latencies,
        actions,
    })
}

/// The period's turns of outcome `?3` (`nudge_sent`, `window_closing_sent`), and those the contact answered
/// within 24 h (a user turn of the conversation after it, through `turns_conversation_created`).
pub(super) const REPORT_NUDGES: &str = concat!(
    "SELECT COUNT(*), COALESCE(SUM(EXISTS (SELECT 1 FROM turns r \
     WHERE r.conversation_id = n.conversation_id AND r.role = 'user' \
       AND r.created_at > n.created_at AND r.created_at <= n.created_at + 86400000)), 0) \
     FROM turns n WHERE n.created_at >= ?1 AND n.created_at < ?2 AND n.outcome = ?3 \
     AND n.conversation_id NOT IN (",
    test_conversations!(),
    ")"
);

pub(super) fn sales_aggregates_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    keys: &crate::store::SalesKeys,
) -> Result<crate::store::SalesCounts> {
    let sales_ids =
        keys.intent_field.is_some() || keys.funnel_field.is_some() || keys.payment_flow.is_some();
    let counts = if sales_ids {
        action_tally_in(conn, from, until, Some(keys))?.sales()
    } else {
        crate::store::SalesCounts::default()
    };
    with_nudges_in(conn, from, until, counts)
}

/// `counts` with the period's nudge counts.
pub(super) fn with_nudges_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    mut counts: crate::store::SalesCounts,
) -> Result<crate::store::SalesCounts> {
    let sent_and_replied = |outcome: &str| {
        conn.prepare_cached(REPORT_NUDGES)?
            .query_row(params![from, until, outcome], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
    };
    (counts.nudges_sent, counts.nudges_replied) = sent_and_replied(crate::store::NUDGE_SENT)?;
    (counts.window_closings_sent, counts.window_closings_replied) =
        sent_and_replied(crate::store::WINDOW_CLOSING_SENT)?;
    Ok(counts)
}

/// The period's turns summed per conversation (through `turns_created`), with whether the
/// conversation was handed to a person; the sales come from the period's [`action_tally_in`].
/// The conversation ids stay here: only the sums of [`conversation_costs_in`] leave the store.
pub(super) const REPORT_CONVERSATION_COSTS: &str = concat!(
    "SELECT conversation_id, SUM(input_tokens), \
     SUM(cached_tokens), SUM(output_tokens), SUM(cost_usd), MAX(escalation_reason IS NOT NULL) \
     FROM turns WHERE created_at >= ?1 AND created_at < ?2 AND conversation_id NOT IN (",
    test_conversations!(),
    ") GROUP BY conversation_id"
);

pub(super) fn conversation_costs_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    tally: &crate::store::report::ActionTally,
) -> Result<crate::store::ConversationCosts> {
    let mut costs = crate::store::ConversationCosts::default();
    let mut statement = conn.prepare_cached(REPORT_CONVERSATION_COSTS)?;
    let mut rows = statement.query(params![from, until])?;
    while let Some(row) = rows.next()? {
        let conversation = crate::store::CostTotals {
            conversations: 1,
            input_tokens: row.get(1)?,
            cached_tokens: row.get(2)?,
            output_tokens: row.get(3)?,
            cost_usd: row.get(4)?,
        };
        costs.all.add(&conversation);
        if row.get_ref(0)?.as_str().is_ok_and(|id| tally.sold(id)) {
            costs.sold.add(&conversation);
        }
        if row.get::<_, bool>(5)? {
            costs.handed_off.add(&conversation);
        }
    }
    Ok(costs)
}

/// A report week, its action records read once for all its measures.
pub(super) fn report_week_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    keys: &crate::store::SalesKeys,
) -> Result<crate::store::ReportWeek> {
    let tally = action_tally_in(conn, from, until, Some(keys))?;
    let aggregates = grouped_turns_in(conn, from, until, tally.actions())?;
    let sales = with_nudges_in(conn, from, until, tally.sales())?;
    let costs = conversation_costs_in(conn, from, until, &tally)?;
    Ok(crate::store::ReportWeek {
        aggregates,
        sales,
        costs,
    })
}
