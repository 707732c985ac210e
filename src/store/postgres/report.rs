//! PostgreSQL: the report's aggregates (`ReportStore`), read at report time only.

use super::*;

#[async_trait]
impl ReportStore for PgStore {
    async fn sales_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &crate::store::SalesKeys,
    ) -> Result<crate::store::SalesCounts> {
        let (from, until) = (to_millis(from), to_millis(until));
        let mut counts = crate::store::SalesCounts::default();
        // The counts SQLite tallies in the store (`store::report::ActionTally`), grouped here by
        // PostgreSQL's jsonb functions; only each entry's tool, id, value, status and
        // contactAsked are read.
        if keys.intent_field.is_some() || keys.funnel_field.is_some() || keys.payment_flow.is_some()
        {
            let row: (i64, i64, i64, i64, i64, i64) = sqlx::query_as(concat!(
                "SELECT COUNT(*) FILTER (WHERE p), COUNT(*) FILTER (WHERE o), \
                 COUNT(*) FILTER (WHERE pr), COUNT(*) FILTER (WHERE l > 0), \
                 COALESCE(SUM(l), 0)::BIGINT, COALESCE(SUM(la), 0)::BIGINT \
                 FROM (SELECT c, \
                         bool_or(tool = 'set_field' AND id = $3 AND value = 'prospect') AS p, \
                         bool_or(tool = 'set_field' AND id = $4 AND value = ANY($5)) AS o, \
                         bool_or(tool = 'set_field' AND id = $4 AND value = ANY($6)) AS pr, \
                         COUNT(*) FILTER (WHERE tool = 'send_flow' AND id = $7) AS l, \
                         COUNT(*) FILTER (WHERE tool = 'send_flow' AND id = $7 AND asked) AS la \
                       FROM (SELECT t.conversation_id AS c, a->>'tool' AS tool, a->>'id' AS id, \
                                    a->>'value' AS value, \
                                    COALESCE(a->'contactAsked' = 'true'::jsonb, false) AS asked \
                             FROM turns t, jsonb_array_elements(CASE WHEN \
                                 jsonb_typeof(t.actions) = 'array' THEN t.actions \
                                 ELSE '[]'::jsonb END) a \
                             WHERE t.created_at >= $1 AND t.created_at < $2 \
                               AND t.actions IS NOT NULL AND a->>'status' = 'performed' \
                               AND t.conversation_id NOT IN (",
                test_conversations!(),
                ")) e GROUP BY c) w"
            ))
            .bind(from)
            .bind(until)
            .bind(keys.intent_field.as_deref())
            .bind(keys.funnel_field.as_deref())
            .bind(&keys.offered_or_later)
            .bind(&keys.prepared_or_later)
            .bind(keys.payment_flow.as_deref())
            .fetch_one(&self.pool)
            .await?;
            (
                counts.prospects,
                counts.offered,
                counts.prepared,
                counts.link_contacts,
                counts.links_sent,
                counts.links_contact_asked,
            ) = row;
        }
        for (outcome, sent, replied) in [
            (
                crate::store::NUDGE_SENT,
                &mut counts.nudges_sent,
                &mut counts.nudges_replied,
            ),
            (
                crate::store::WINDOW_CLOSING_SENT,
                &mut counts.window_closings_sent,
                &mut counts.window_closings_replied,
            ),
        ] {
            (*sent, *replied) = sqlx::query_as(concat!(
                "SELECT COUNT(*), COUNT(*) FILTER (WHERE EXISTS (SELECT 1 FROM turns r \
                 WHERE r.conversation_id = n.conversation_id AND r.role = 'user' \
                   AND r.created_at > n.created_at \
                   AND r.created_at <= n.created_at + interval '24 hours')) \
                 FROM turns n WHERE n.created_at >= $1 AND n.created_at < $2 \
                   AND n.outcome = $3 AND n.conversation_id NOT IN (",
                test_conversations!(),
                ")"
            ))
            .bind(from)
            .bind(until)
            .bind(outcome)
            .fetch_one(&self.pool)
            .await?;
        }
        Ok(counts)
    }

    async fn conversation_costs(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &crate::store::SalesKeys,
    ) -> Result<crate::store::ConversationCosts> {
        let (from, until) = (to_millis(from), to_millis(until));
        // Per conversation (through `turns_created`): its sums, whether a turn carried an
        // escalation reason, and whether a performed entry wrote the funnel field's
        // `link_sent` stage (only each entry's tool, id, value and status are read). Then the
        // three groups' sums; no conversation id leaves the statement.
        type Sums = (i64, i64, i64, i64, f64);
        let row: (Sums, Sums, Sums) = {
            let raw: (
                i64,
                i64,
                i64,
                i64,
                f64,
                i64,
                i64,
                i64,
                i64,
                f64,
                i64,
                i64,
                i64,
                i64,
                f64,
            ) = sqlx::query_as(concat!(
                "SELECT COUNT(*), COALESCE(SUM(i), 0)::BIGINT, COALESCE(SUM(c), 0)::BIGINT, \
                 COALESCE(SUM(o), 0)::BIGINT, COALESCE(SUM(usd), 0)::DOUBLE PRECISION, \
                 COUNT(*) FILTER (WHERE sold), \
                 COALESCE(SUM(i) FILTER (WHERE sold), 0)::BIGINT, \
                 COALESCE(SUM(c) FILTER (WHERE sold), 0)::BIGINT, \
                 COALESCE(SUM(o) FILTER (WHERE sold), 0)::BIGINT, \
                 COALESCE(SUM(usd) FILTER (WHERE sold), 0)::DOUBLE PRECISION, \
                 COUNT(*) FILTER (WHERE handed), \
                 COALESCE(SUM(i) FILTER (WHERE handed), 0)::BIGINT, \
                 COALESCE(SUM(c) FILTER (WHERE handed), 0)::BIGINT, \
                 COALESCE(SUM(o) FILTER (WHERE handed), 0)::BIGINT, \
                 COALESCE(SUM(usd) FILTER (WHERE handed), 0)::DOUBLE PRECISION \
                 FROM (SELECT t.conversation_id, SUM(t.input_tokens) AS i, \
                         SUM(t.cached_tokens) AS c, SUM(t.output_tokens) AS o, \
                         SUM(t.cost_usd) AS usd, \
                         bool_or(t.escalation_reason IS NOT NULL) AS handed, \
                         bool_or($3::TEXT IS NOT NULL AND t.actions IS NOT NULL AND EXISTS ( \
                           SELECT 1 FROM jsonb_array_elements(CASE WHEN \
                               jsonb_typeof(t.actions) = 'array' THEN t.actions \
                               ELSE '[]'::jsonb END) a \
                           WHERE a->>'tool' = 'set_field' AND a->>'id' = $3 \
                             AND a->>'value' = $4 AND a->>'status' = 'performed')) AS sold \
                       FROM turns t WHERE t.created_at >= $1 AND t.created_at < $2 \
                       AND t.conversation_id NOT IN (",
                test_conversations!(),
                ") GROUP BY t.conversation_id) w"
            ))
            .bind(from)
            .bind(until)
            .bind(keys.funnel_field.as_deref())
            .bind(crate::store::SOLD_STAGE)
            .fetch_one(&self.pool)
            .await?;
            (
                (raw.0, raw.1, raw.2, raw.3, raw.4),
                (raw.5, raw.6, raw.7, raw.8, raw.9),
                (raw.10, raw.11, raw.12, raw.13, raw.14),
            )
        };
        let totals =
            |(conversations, input_tokens, cached_tokens, output_tokens, cost_usd): Sums| {
                crate::store::CostTotals {
                    conversations,
                    input_tokens,
                    cached_tokens,
                    output_tokens,
                    cost_usd,
                }
            };
        Ok(crate::store::ConversationCosts {
            all: totals(row.0),
            sold: totals(row.1),
            handed_off: totals(row.2),
        })
    }

    async fn report_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<crate::store::ReportAggregates> {
        let (from, until) = (to_millis(from), to_millis(until));
        // Contacts whose first turn is in the period (see the SQLite statement).
        let new_contacts: i64 = sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM \
             (SELECT DISTINCT conversation_id FROM turns \
              WHERE created_at >= $1 AND created_at < $2 AND conversation_id NOT IN (",
            test_conversations!(),
            ")) w \
             WHERE NOT EXISTS (SELECT 1 FROM turns e \
                               WHERE e.conversation_id = w.conversation_id \
                                 AND e.created_at < $1)"
        ))
        .bind(from)
        .bind(until)
        .fetch_one(&self.pool)
        .await?;
        type GroupRow = (
            chrono::NaiveDate,
            String,
            Option<String>,
            Option<String>,
            bool,
            i64,
            i64,
            i64,
            i64,
            f64,
        );
        let groups: Vec<GroupRow> = sqlx::query_as(concat!(
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, role, outcome, \
             escalation_reason, model IS NOT NULL AS model_written, COUNT(*), \
             SUM(reads)::BIGINT, SUM(input_tokens)::BIGINT, SUM(output_tokens)::BIGINT, \
             SUM(cost_usd)::DOUBLE PRECISION \
             FROM turns WHERE created_at >= $1 AND created_at < $2 AND conversation_id NOT IN (",
            test_conversations!(),
            ") GROUP BY day, role, outcome, escalation_reason, model_written ORDER BY day"
        ))
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        let turn_groups = groups
            .into_iter()
            .map(|g| crate::store::TurnGroup {
                day: g.0,
                role: crate::store::report::role_of(&g.1),
                outcome: g.2,
                escalation_reason: g.3,
                model_written: g.4,
                turns: g.5,
                reads: g.6,
                input_tokens: g.7,
                output_tokens: g.8,
                cost_usd: g.9,
            })
            .collect();
        let inline_latencies: Vec<(i64, i64)> = sqlx::query_as(concat!(
            "SELECT latency_ms, COUNT(*) FROM turns \
             WHERE created_at >= $1 AND created_at < $2 AND outcome = 'answered_inline' \
             AND conversation_id NOT IN (",
            test_conversations!(),
            ") GROUP BY latency_ms ORDER BY latency_ms"
        ))
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        // Only each entry's tool and status are read.
        let actions: Vec<(Option<String>, Option<String>, i64)> = sqlx::query_as(concat!(
            "SELECT a->>'tool' AS tool, a->>'status' AS status, COUNT(*) \
             FROM turns t, jsonb_array_elements( \
                 CASE WHEN jsonb_typeof(t.actions) = 'array' THEN t.actions ELSE '[]'::jsonb END) a \
             WHERE t.created_at >= $1 AND t.created_at < $2 AND t.actions IS NOT NULL \
             AND t.conversation_id NOT IN (",
            test_conversations!(),
            ") GROUP BY tool, status ORDER BY tool, status"
        ))
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        Ok(crate::store::ReportAggregates {
            new_contacts,
            turn_groups,
            inline_latencies,
            actions: actions
                .into_iter()
                .map(|(tool, status, count)| crate::store::ActionCount {
                    tool: tool.unwrap_or_default(),
                    status: status.unwrap_or_default(),
                    count,
                })
                .collect(),
        })
    }
}
