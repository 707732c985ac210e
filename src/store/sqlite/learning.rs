//! SQLite: learning runs, proposals, playbook versions and eval records (`LearningStore`).

use super::*;
use crate::store::learning::{
    DecisionKind, EvalRecord, LearningDecision, LearningRun, PlaybookTurn, PlaybookVersion,
    Proposal, ProposalStatus, Review, RunEnd, RunStatus,
};

macro_rules! run_columns {
    () => {
        "id, week, forced, status, converted_count, not_converted_count, cost_usd, reason, \
         started_at, finished_at"
    };
}
macro_rules! proposal_columns {
    () => {
        "id, run_id, text, rationale, converted_count, not_converted_count, turn_ids, status, \
         reviewed_at, created_at"
    };
}
macro_rules! decision_columns {
    () => {
        "id, decision, proposal_id, version_hash, place, reason, decided_by, decided_at"
    };
}
macro_rules! version_columns {
    () => {
        "id, content_hash, insights, active, activated_at, created_at"
    };
}

fn run_from(row: &Row<'_>) -> Result<LearningRun> {
    Ok(LearningRun {
        id: row.get(0)?,
        week: row.get(1)?,
        forced: row.get(2)?,
        status: RunStatus::parse(text(row, 3)?)?,
        converted_count: row.get(4)?,
        not_converted_count: row.get(5)?,
        cost_usd: row.get(6)?,
        reason: row.get(7)?,
        started_at: time(row.get(8)?)?,
        finished_at: opt_time(row.get(9)?)?,
    })
}

fn decision_from(row: &Row<'_>) -> Result<LearningDecision> {
    Ok(LearningDecision {
        id: row.get(0)?,
        kind: DecisionKind::parse(text(row, 1)?)?,
        proposal_id: row.get(2)?,
        version_hash: row.get(3)?,
        place: row.get(4)?,
        reason: row.get(5)?,
        by: row.get(6)?,
        at: time(row.get(7)?)?,
    })
}

/// Records one decision (inside the write that made it).
fn record_decision(conn: &Db<'_>, decision: &LearningDecision) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO learning_decisions (decision, proposal_id, version_hash, place, reason, \
         decided_by, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )?
    .execute(params![
        decision.kind.as_str(),
        decision.proposal_id,
        decision.version_hash,
        decision.place,
        decision.reason,
        decision.by,
        ms(decision.at)
    ])?;
    Ok(())
}

fn strings(raw: &str) -> Result<Vec<String>> {
    serde_json::from_str(raw).map_err(|_| StoreError::Corrupt("invalid stored list".to_owned()))
}

fn proposal_from(row: &Row<'_>) -> Result<Proposal> {
    Ok(Proposal {
        id: row.get(0)?,
        run_id: row.get(1)?,
        text: row.get(2)?,
        rationale: row.get(3)?,
        converted_count: row.get(4)?,
        not_converted_count: row.get(5)?,
        turn_ids: strings(text(row, 6)?)?,
        status: ProposalStatus::parse(text(row, 7)?)?,
        reviewed_at: opt_time(row.get(8)?)?,
        created_at: time(row.get(9)?)?,
    })
}

fn version_from(row: &Row<'_>) -> Result<PlaybookVersion> {
    Ok(PlaybookVersion {
        id: row.get(0)?,
        content_hash: row.get(1)?,
        insights: strings(text(row, 2)?)?,
        active: row.get(3)?,
        activated_at: opt_time(row.get(4)?)?,
        created_at: time(row.get(5)?)?,
    })
}

fn list_text(list: &[String]) -> Result<String> {
    serde_json::to_string(list)
        .map_err(|_| StoreError::Database("cannot serialise a list".to_owned()))
}

#[async_trait]
impl crate::store::LearningStore for SqliteStore {
    async fn claim_learning_run(
        &self,
        week: &str,
        forced: bool,
        at: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        let week = week.to_owned();
        self.write(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO learning_runs (week, forced, status, started_at) \
                     VALUES (?, ?, 'running', ?)",
                )?
                .execute(params![week, forced, ms(at)])?;
            Ok((inserted == 1).then(|| conn.last_insert_rowid()))
        })
        .await
    }

    async fn finish_learning_run(&self, id: i64, end: &RunEnd) -> Result<()> {
        let end = end.clone();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE learning_runs SET status = ?, converted_count = ?, \
                 not_converted_count = ?, cost_usd = ?, reason = ?, finished_at = ? \
                 WHERE id = ? AND status = 'running'",
                params![
                    end.status.as_str(),
                    end.converted_count,
                    end.not_converted_count,
                    end.cost_usd,
                    end.reason,
                    ms(end.at),
                    id
                ],
                "running learning run",
            )?;
            for proposal in &end.proposals {
                conn.prepare_cached(
                    "INSERT INTO insight_proposals (run_id, text, rationale, converted_count, \
                     not_converted_count, turn_ids, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                )?
                .execute(params![
                    id,
                    proposal.text,
                    proposal.rationale,
                    proposal.converted_count,
                    proposal.not_converted_count,
                    list_text(&proposal.turn_ids)?,
                    ms(end.at)
                ])?;
            }
            Ok(())
        })
        .await
    }

    async fn fail_running_learning_runs(
        &self,
        started_before: DateTime<Utc>,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<u64> {
        let reason = reason.to_owned();
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE learning_runs SET status = 'failed', reason = ?, finished_at = ? \
                     WHERE status = 'running' AND started_at < ?",
                )?
                .execute(params![reason, ms(at), ms(started_before)])?;
            Ok(changed as u64)
        })
        .await
    }

    async fn learning_runs(&self, limit: i64) -> Result<Vec<LearningRun>> {
        self.read_query(query_all, LATEST_RUNS, [limit], run_from)
            .await
    }

    async fn proposals(&self, status: ProposalStatus, limit: i64) -> Result<Vec<Proposal>> {
        self.read(move |conn| {
            let mut found = query_all(
                conn,
                concat!(
                    "SELECT ",
                    proposal_columns!(),
                    " FROM insight_proposals WHERE status = ? ORDER BY id DESC LIMIT ?"
                ),
                params![status.as_str(), limit],
                proposal_from,
            )?;
            found.reverse();
            Ok(found)
        })
        .await
    }

    async fn record_review(&self, review: &Review) -> Result<()> {
        let review = review.clone();
        self.write(move |conn| {
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
                for id in ids {
                    let changed = conn
                        .prepare_cached(
                            "UPDATE insight_proposals SET status = ?, reviewed_at = ? \
                             WHERE id = ? AND status = 'pending'",
                        )?
                        .execute(params![status.as_str(), ms(review.at), id])?;
                    if changed == 1 {
                        let reason = review.reasons.iter().find(|(r, _)| r == id);
                        record_decision(
                            conn,
                            &decision(kind, Some(*id), None, reason.map(|r| &r.1)),
                        )?;
                    }
                }
            }
            for place in &review.retired {
                record_decision(
                    conn,
                    &decision(DecisionKind::Retired, None, Some(*place), None),
                )?;
            }
            if let Some((hash, insights)) = &review.version {
                conn.prepare_cached(
                    "INSERT OR IGNORE INTO playbook_versions (content_hash, insights, created_at) \
                     VALUES (?, ?, ?)",
                )?
                .execute(params![hash, list_text(insights)?, ms(review.at)])?;
            }
            Ok(())
        })
        .await
    }

    async fn playbook_versions(&self) -> Result<Vec<PlaybookVersion>> {
        self.read_query(query_all, PLAYBOOK_VERSIONS, [], version_from)
            .await
    }

    async fn active_playbook(&self) -> Result<Option<PlaybookVersion>> {
        self.read(move |conn| {
            Ok(query_all(
                conn,
                concat!(
                    "SELECT ",
                    version_columns!(),
                    " FROM playbook_versions WHERE active = 1"
                ),
                [],
                version_from,
            )?
            .pop())
        })
        .await
    }

    async fn activate_playbook(&self, id: i64, by: &str, at: DateTime<Utc>) -> Result<()> {
        let by = by.to_owned();
        self.write(move |conn| {
            let before: Option<(String, Option<i64>)> = query_all(
                conn,
                "SELECT content_hash, activated_at FROM playbook_versions WHERE id = ?",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .pop();
            let Some((hash, activated_before)) = before else {
                return Err(not_found("playbook version"));
            };
            conn.prepare_cached(
                "UPDATE playbook_versions SET active = 0 WHERE active = 1 AND id <> ?",
            )?
            .execute(params![id])?;
            update_one(
                conn,
                "UPDATE playbook_versions SET active = 1, \
                 activated_at = COALESCE(activated_at, ?) WHERE id = ?",
                params![ms(at), id],
                "playbook version",
            )?;
            let kind = match activated_before {
                Some(_) => DecisionKind::RolledBack,
                None => DecisionKind::Activated,
            };
            record_decision(
                conn,
                &LearningDecision {
                    id: 0,
                    kind,
                    proposal_id: None,
                    version_hash: Some(hash),
                    place: None,
                    reason: None,
                    by: by.clone(),
                    at,
                },
            )
        })
        .await
    }

    async fn learning_decisions(&self, limit: i64) -> Result<Vec<LearningDecision>> {
        self.read_query(
            query_all,
            concat!(
                "SELECT ",
                decision_columns!(),
                " FROM learning_decisions ORDER BY id DESC LIMIT ?"
            ),
            [limit],
            decision_from,
        )
        .await
    }

    async fn record_eval(&self, record: &EvalRecord) -> Result<()> {
        let record = record.clone();
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO eval_records (playbook_hash, suite_hash, model, outcomes, \
                 created_at) VALUES (?, ?, ?, ?, ?)",
            )?
            .execute(params![
                record.playbook_hash,
                record.suite_hash,
                record.model,
                json_text(&record.outcomes)?,
                ms(record.created_at)
            ])?;
            Ok(())
        })
        .await
    }

    async fn latest_eval(
        &self,
        playbook_hash: &str,
        suite_hash: &str,
    ) -> Result<Option<EvalRecord>> {
        let (playbook_hash, suite_hash) = (playbook_hash.to_owned(), suite_hash.to_owned());
        self.read(move |conn| {
            Ok(query_all(
                conn,
                "SELECT playbook_hash, suite_hash, model, outcomes, created_at FROM eval_records \
                 WHERE playbook_hash = ? AND suite_hash = ? AND model NOT LIKE 'mock:%' \
                 ORDER BY id DESC LIMIT 1",
                params![playbook_hash, suite_hash],
                |row| {
                    Ok(EvalRecord {
                        playbook_hash: row.get(0)?,
                        suite_hash: row.get(1)?,
                        model: row.get(2)?,
                        outcomes: json(text(row, 3)?)?,
                        created_at: time(row.get(4)?)?,
                    })
                },
            )?
            .pop())
        })
        .await
    }

    async fn conversations_with_actions_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        self.read_query(
            query_all,
            "SELECT DISTINCT conversation_id FROM turns WHERE created_at >= ? \
                 AND role = 'agent' AND actions IS NOT NULL AND actions <> '[]'",
            [ms(since)],
            |row| uuid(text(row, 0)?),
        )
        .await
    }

    async fn playbook_turns(&self, since: DateTime<Utc>) -> Result<Vec<PlaybookTurn>> {
        self.read(move |conn| {
            query_all(
                conn,
                "SELECT conversation_id, created_at, playbook_version, actions FROM turns \
                 WHERE created_at >= ? AND role = 'agent' AND actions IS NOT NULL \
                 AND actions <> '[]' ORDER BY created_at, seq",
                params![ms(since)],
                |row| {
                    Ok(PlaybookTurn {
                        conversation_id: uuid(text(row, 0)?)?,
                        at: time(row.get(1)?)?,
                        playbook_version: row.get(2)?,
                        actions: json(text(row, 3)?)?,
                    })
                },
            )
        })
        .await
    }

    async fn last_bound_turns(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(ConversationId, DateTime<Utc>)>> {
        self.read_query(
            query_all,
            "SELECT conversation_id, MAX(created_at) FROM turns \
                 WHERE bound = 1 AND created_at >= ? GROUP BY conversation_id",
            [ms(since)],
            |row| Ok((uuid(text(row, 0)?)?, time(row.get(1)?)?)),
        )
        .await
    }
}

/// The latest `?` learning runs, newest first.
const LATEST_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM learning_runs ORDER BY id DESC LIMIT ?"
);

/// Every playbook version, oldest first.
const PLAYBOOK_VERSIONS: &str = concat!(
    "SELECT ",
    version_columns!(),
    " FROM playbook_versions ORDER BY id"
);
