//! PostgreSQL: learning runs, proposals, playbook versions and eval records (`LearningStore`).

use super::*;
use crate::store::learning::{
    DecisionKind, EvalRecord, LearningDecision, LearningRun, PlaybookTurn, PlaybookVersion,
    Proposal, ProposalStatus, Review, RunEnd, RunStatus,
};

/// `cost_usd` is NUMERIC(12, 6) and read back as a double.
const RUN_COLUMNS: &str = "id, week, forced, status, converted_count, not_converted_count, \
     cost_usd::float8 AS cost_usd, reason, started_at, finished_at";
const PROPOSAL_COLUMNS: &str = "id, run_id, text, rationale, converted_count, \
     not_converted_count, turn_ids, status, reviewed_at, created_at";
const VERSION_COLUMNS: &str = "id, content_hash, insights, active, activated_at, created_at";
const DECISION_COLUMNS: &str =
    "id, decision, proposal_id, version_hash, place, reason, decided_by, decided_at";

const LEARNING_DECISION: Record<LearningDecision> = Record {
    columns: DECISION_COLUMNS,
    from: decision_from,
};

fn decision_from(row: &PgRow) -> Result<LearningDecision> {
    let kind: String = row.try_get("decision")?;
    Ok(LearningDecision {
        id: row.try_get("id")?,
        kind: DecisionKind::parse(&kind)?,
        proposal_id: row.try_get("proposal_id")?,
        version_hash: row.try_get("version_hash")?,
        place: row.try_get("place")?,
        reason: row.try_get("reason")?,
        by: row.try_get("decided_by")?,
        at: row.try_get("decided_at")?,
    })
}

/// Records one decision inside the transaction that made it.
async fn record_decision(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    decision: &LearningDecision,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO learning_decisions (decision, proposal_id, version_hash, place, reason, \
         decided_by, decided_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(decision.kind.as_str())
    .bind(decision.proposal_id)
    .bind(&decision.version_hash)
    .bind(decision.place)
    .bind(&decision.reason)
    .bind(&decision.by)
    .bind(to_millis(decision.at))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

const LEARNING_RUN: Record<LearningRun> = Record {
    columns: RUN_COLUMNS,
    from: run_from,
};

fn run_from(row: &PgRow) -> Result<LearningRun> {
    let status: String = row.try_get("status")?;
    Ok(LearningRun {
        id: row.try_get("id")?,
        week: row.try_get("week")?,
        forced: row.try_get("forced")?,
        status: RunStatus::parse(&status)?,
        converted_count: row.try_get("converted_count")?,
        not_converted_count: row.try_get("not_converted_count")?,
        cost_usd: row.try_get("cost_usd")?,
        reason: row.try_get("reason")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

fn proposal_from(row: &PgRow) -> Result<Proposal> {
    let status: String = row.try_get("status")?;
    let Json(turn_ids): Json<Vec<String>> = row.try_get("turn_ids")?;
    Ok(Proposal {
        id: row.try_get("id")?,
        run_id: row.try_get("run_id")?,
        text: row.try_get("text")?,
        rationale: row.try_get("rationale")?,
        converted_count: row.try_get("converted_count")?,
        not_converted_count: row.try_get("not_converted_count")?,
        turn_ids,
        status: ProposalStatus::parse(&status)?,
        reviewed_at: row.try_get("reviewed_at")?,
        created_at: row.try_get("created_at")?,
    })
}

fn version_from(row: &PgRow) -> Result<PlaybookVersion> {
    let Json(insights): Json<Vec<String>> = row.try_get("insights")?;
    Ok(PlaybookVersion {
        id: row.try_get("id")?,
        content_hash: row.try_get("content_hash")?,
        insights,
        active: row.try_get("active")?,
        activated_at: row.try_get("activated_at")?,
        created_at: row.try_get("created_at")?,
    })
}

#[async_trait]
impl crate::store::LearningStore for PgStore {
    async fn claim_learning_run(
        &self,
        week: &str,
        forced: bool,
        at: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO learning_runs (week, forced, status, started_at) \
             VALUES ($1, $2, 'running', $3) \
             ON CONFLICT (week) WHERE forced = FALSE DO NOTHING RETURNING id",
        )
        .bind(week)
        .bind(forced)
        .bind(to_millis(at))
        .fetch_optional(&self.pool)
        .await?;
        Ok(id)
    }

    async fn finish_learning_run(&self, id: i64, end: &RunEnd) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE learning_runs SET status = $1, converted_count = $2, \
             not_converted_count = $3, cost_usd = $4, reason = $5, finished_at = $6 \
             WHERE id = $7 AND status = 'running'",
        )
        .bind(end.status.as_str())
        .bind(end.converted_count)
        .bind(end.not_converted_count)
        .bind(end.cost_usd)
        .bind(&end.reason)
        .bind(to_millis(end.at))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        changed(done, "running learning run")?;
        for proposal in &end.proposals {
            sqlx::query(
                "INSERT INTO insight_proposals (run_id, text, rationale, converted_count, \
                 not_converted_count, turn_ids, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(id)
            .bind(&proposal.text)
            .bind(&proposal.rationale)
            .bind(proposal.converted_count)
            .bind(proposal.not_converted_count)
            .bind(Json(&proposal.turn_ids))
            .bind(to_millis(end.at))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn fail_running_learning_runs(
        &self,
        started_before: DateTime<Utc>,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE learning_runs SET status = 'failed', reason = $1, finished_at = $2 \
             WHERE status = 'running' AND started_at < $3",
        )
        .bind(reason)
        .bind(to_millis(at))
        .bind(to_millis(started_before))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn learning_runs(&self, limit: i64) -> Result<Vec<LearningRun>> {
        self.all_by(
            LEARNING_RUN,
            "FROM learning_runs ORDER BY id DESC LIMIT $1",
            limit,
        )
        .await
    }

    async fn proposals(&self, status: ProposalStatus, limit: i64) -> Result<Vec<Proposal>> {
        let rows = sqlx::query(&format!(
            "SELECT {PROPOSAL_COLUMNS} FROM insight_proposals WHERE status = $1 \
             ORDER BY id DESC LIMIT $2"
        ))
        .bind(status.as_str())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut found = rows.iter().map(proposal_from).collect::<Result<Vec<_>>>()?;
        found.reverse();
        Ok(found)
    }

    async fn record_review(&self, review: &Review) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let made = review.version.as_ref().map(|(hash, _)| hash.clone());
        let decision = |kind, proposal_id, place, reason: Option<&String>| LearningDecision {
            id: 0,
            kind,
            proposal_id,
            version_hash: made.clone().filter(|_| kind != DecisionKind::Rejected),
            place,
            reason: reason.cloned(),
            by: review.by.clone(),
            at: review.at,
        };
        let decided = [
            (
                ProposalStatus::Approved,
                DecisionKind::Approved,
                &review.approved,
            ),
            (
                ProposalStatus::Rejected,
                DecisionKind::Rejected,
                &review.rejected,
            ),
        ];
        for (status, kind, ids) in decided {
            // Only a proposal still pending changes, and only a change is a decision.
            let changed: Vec<i64> = sqlx::query_scalar(
                "UPDATE insight_proposals SET status = $1, reviewed_at = $2 \
                 WHERE id = ANY($3) AND status = 'pending' RETURNING id",
            )
            .bind(status.as_str())
            .bind(to_millis(review.at))
            .bind(ids)
            .fetch_all(&mut *tx)
            .await?;
            for id in ids.iter().filter(|id| changed.contains(id)) {
                let reason = review.reasons.iter().find(|(r, _)| r == id);
                record_decision(
                    &mut tx,
                    &decision(kind, Some(*id), None, reason.map(|r| &r.1)),
                )
                .await?;
            }
        }
        for place in &review.retired {
            record_decision(
                &mut tx,
                &decision(DecisionKind::Retired, None, Some(*place), None),
            )
            .await?;
        }
        if let Some((hash, insights)) = &review.version {
            sqlx::query(
                "INSERT INTO playbook_versions (content_hash, insights, created_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (content_hash) DO NOTHING",
            )
            .bind(hash)
            .bind(Json(insights))
            .bind(to_millis(review.at))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn playbook_versions(&self) -> Result<Vec<PlaybookVersion>> {
        let rows = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM playbook_versions ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(version_from).collect()
    }

    async fn active_playbook(&self) -> Result<Option<PlaybookVersion>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM playbook_versions WHERE active"
        ))
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(version_from).transpose()
    }

    async fn activate_playbook(&self, id: i64, by: &str, at: DateTime<Utc>) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let before: Option<(String, Option<DateTime<Utc>>)> = sqlx::query_as(
            "SELECT content_hash, activated_at FROM playbook_versions WHERE id = $1 FOR UPDATE",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((hash, activated_before)) = before else {
            return Err(not_found("playbook version"));
        };
        sqlx::query("UPDATE playbook_versions SET active = FALSE WHERE active AND id <> $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query(
            "UPDATE playbook_versions SET active = TRUE, \
             activated_at = COALESCE(activated_at, $1) WHERE id = $2",
        )
        .bind(to_millis(at))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        changed(done, "playbook version")?;
        let kind = match activated_before {
            Some(_) => DecisionKind::RolledBack,
            None => DecisionKind::Activated,
        };
        let decision = LearningDecision {
            id: 0,
            kind,
            proposal_id: None,
            version_hash: Some(hash),
            place: None,
            reason: None,
            by: by.to_owned(),
            at,
        };
        record_decision(&mut tx, &decision).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn learning_decisions(&self, limit: i64) -> Result<Vec<LearningDecision>> {
        self.all_by(
            LEARNING_DECISION,
            "FROM learning_decisions ORDER BY id DESC LIMIT $1",
            limit,
        )
        .await
    }

    async fn record_eval(&self, record: &EvalRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO eval_records (playbook_hash, suite_hash, model, outcomes, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&record.playbook_hash)
        .bind(&record.suite_hash)
        .bind(&record.model)
        .bind(Json(&record.outcomes))
        .bind(to_millis(record.created_at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn latest_eval(
        &self,
        playbook_hash: &str,
        suite_hash: &str,
    ) -> Result<Option<EvalRecord>> {
        let row: Option<(String, String, String, Json<Value>, DateTime<Utc>)> = sqlx::query_as(
            "SELECT playbook_hash, suite_hash, model, outcomes, created_at FROM eval_records \
             WHERE playbook_hash = $1 AND suite_hash = $2 AND model NOT LIKE 'mock:%' \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(playbook_hash)
        .bind(suite_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(
            |(playbook_hash, suite_hash, model, Json(outcomes), created_at)| EvalRecord {
                playbook_hash,
                suite_hash,
                model,
                outcomes,
                created_at,
            },
        ))
    }

    async fn conversations_with_actions_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        let ids: Vec<ConversationId> = sqlx::query_scalar(
            "SELECT DISTINCT conversation_id FROM turns WHERE created_at >= $1 \
             AND role = 'agent' AND actions IS NOT NULL AND actions <> '[]'::jsonb",
        )
        .bind(to_millis(since))
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }

    async fn playbook_turns(&self, since: DateTime<Utc>) -> Result<Vec<PlaybookTurn>> {
        let rows: Vec<(ConversationId, DateTime<Utc>, Option<String>, Json<Value>)> =
            sqlx::query_as(
                "SELECT conversation_id, created_at, playbook_version, actions FROM turns \
                 WHERE created_at >= $1 AND role = 'agent' AND actions IS NOT NULL \
                 AND actions <> '[]'::jsonb ORDER BY created_at, seq",
            )
            .bind(to_millis(since))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(conversation_id, at, playbook_version, Json(actions))| PlaybookTurn {
                    conversation_id,
                    at,
                    playbook_version,
                    actions,
                },
            )
            .collect())
    }

    async fn last_bound_turns(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(ConversationId, DateTime<Utc>)>> {
        let rows: Vec<(ConversationId, DateTime<Utc>)> = sqlx::query_as(
            "SELECT conversation_id, MAX(created_at) FROM turns \
             WHERE bound AND created_at >= $1 GROUP BY conversation_id",
        )
        .bind(to_millis(since))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}
