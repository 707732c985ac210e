//! What a `GET /metrics` scrape reads from the store: once per scrape and never on a turn, with
//! bounded queries under [`STORE_SAMPLE_TIMEOUT`]; `crate::metrics` only holds the numbers.

use chrono::{DateTime, Utc};

use crate::config::Budget;
use crate::metrics::{Metrics, OUTBOX_BACKLOG_COUNT_CAP, STORE_SAMPLE_TIMEOUT, StoreGauges};
use crate::store::Store;

/// Reads the store's gauges into `metrics`: the open outbox rows (counted up to
/// [`OUTBOX_BACKLOG_COUNT_CAP`]), the age of the oldest row due, and today's budget use beside
/// its caps. A read that fails or outlasts [`STORE_SAMPLE_TIMEOUT`] leaves the last values and
/// is counted.
/// `held_since` is `holdHours` ago (`None`: the hold is off, nobody is held).
pub(super) async fn sample_store(
    metrics: &Metrics,
    store: &dyn Store,
    budget: &Budget,
    held_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) {
    metrics.budget_caps(budget.daily_cost_cap_usd, budget.daily_token_cap);
    let reads = async {
        let backlog = store.outbox_backlog(now, OUTBOX_BACKLOG_COUNT_CAP).await?;
        let spent = store.budget(now.date_naive()).await?;
        let held = match held_since {
            Some(since) => store.held_contacts(since).await?,
            None => 0,
        };
        Ok::<_, crate::store::StoreError>((backlog, spent, held))
    };
    match tokio::time::timeout(STORE_SAMPLE_TIMEOUT, reads).await {
        Ok(Ok((backlog, spent, held))) => {
            let age = backlog
                .oldest_due_at
                .map(|due| (now - due).num_milliseconds().max(0) as f64 / 1000.0)
                .unwrap_or(0.0);
            metrics.store_gauges(StoreGauges {
                contacts_held: held,
                outbox_backlog: backlog.rows,
                oldest_due_age_secs: age,
                spent_usd: spent.cost_usd,
                spent_tokens: spent.tokens,
            });
        }
        Ok(Err(error)) => {
            metrics.store_sample_failures.inc();
            tracing::warn!(error = %error, "metrics: the store's gauges could not be read");
        }
        Err(_) => {
            metrics.store_sample_failures.inc();
            tracing::warn!("metrics: the store's gauges read timed out");
        }
    }
}
