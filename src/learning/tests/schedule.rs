//! 031 § Scheduling: the check `serve` and `worker` make every hour ([`Weekly::check`]) runs
//! the analyst once per ISO week, on tokio's paused clock moved an hour at a time, with a
//! scripted analyst; a tenant without `learning` is never run. Both backends, by the parent
//! module.

use std::sync::Arc;

use super::*;
use crate::clock::Clock;
use crate::config::ConfigHandle;
use crate::learning::schedule::{CHECK_EVERY, Weekly};

fn weekly(
    store: Arc<dyn Store>,
    config: TenantConfig,
    model: Arc<ScriptedModel>,
    tags: Arc<Tags>,
    start: DateTime<Utc>,
) -> Weekly {
    Weekly {
        store,
        config: Arc::new(ConfigHandle::new(
            config,
            crate::config::examples::shipped_examples(),
            ConfigContext::default(),
        )),
        model,
        tags,
        temperature: 0.2,
        clock: Clock::starting_at(start),
    }
}

/// Eight days of hourly checks from Monday 2026-11-30 08:00 (2026-W49): two runs, W49's at the
/// first check and W50's at the first check of Monday 2026-12-07 (00:00 UTC, 160 hours on);
/// two analyst calls.
pub(super) async fn spec_031_the_hourly_check_runs_the_analyst_once_per_iso_week(
    store: Arc<dyn Store>,
) {
    assert_eq!(CHECK_EVERY, std::time::Duration::from_secs(3600));
    let tags = Arc::new(Tags::default());
    seed_cohort(store.as_ref(), &tags, 20, 20).await;
    let model = Arc::new(ScriptedModel::replies([
        analyst_answer(json!([])),
        analyst_answer(json!([])),
        analyst_answer(json!([])),
    ]));
    let start = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
    let check = weekly(
        store.clone(),
        learning_tenant(5.0),
        model.clone(),
        tags,
        start,
    );
    let mut ran = Vec::new();
    for hour in 0..8 * 24 {
        let before = check.clock.now();
        if let Some(outcome) = check.check().await
            && !matches!(outcome, Outcome::AlreadyClaimed { .. })
        {
            ran.push((hour, finished(&outcome).0, iso_of(before)));
        }
        // The next check is an hour after this one started (the label reads took time).
        let next = start + chrono::Duration::hours(hour + 1);
        let wait = (next - check.clock.now()).to_std().unwrap_or_default();
        tokio::time::advance(wait).await;
    }
    assert_eq!(
        ran,
        vec![
            (0, RunStatus::Completed, "2026-W49".to_owned()),
            (160, RunStatus::Completed, "2026-W50".to_owned()),
        ],
        "one run a week, at the week's first check"
    );
    assert_eq!(model.calls(), 2, "one analyst call a week");
    let weeks: Vec<String> = store
        .learning_runs(10)
        .await
        .expect("runs")
        .into_iter()
        .map(|r| r.week)
        .collect();
    assert_eq!(weeks, vec!["2026-W50".to_owned(), "2026-W49".to_owned()]);

    // A tenant without `learning`: the check does nothing, claims nothing.
    let mut plain = learning_tenant(5.0);
    plain.rules.learning = None;
    let idle = weekly(
        store.clone(),
        plain,
        model.clone(),
        Arc::new(Tags::default()),
        start + chrono::Duration::days(14),
    );
    assert_eq!(idle.check().await, None);
    assert_eq!(store.learning_runs(10).await.expect("runs").len(), 2);
    assert_eq!(model.calls(), 2);
}

fn iso_of(at: DateTime<Utc>) -> String {
    crate::learning::iso_week(at)
}
