//! `GET /console/report`: the weekly figures the `report` command shows, in the owner's
//! language, from the same `report::build` and `report::html::content` (one implementation):
//! the week at a glance with each figure's meaning under it, the charts drawn server-side as
//! inline SVG (presentation attributes only, so the console's `style-src 'self'` lets them
//! render), the tables, and what is not measured yet. A week with no data draws an empty chart
//! with a sentence. Test contacts are left out, as in the command.
//!
//! Reading the weeks costs what the command's read costs (about a second for 4 weeks over
//! 100,000 turns on SQLite, `docs/PERFORMANCE.md`), so the built report is kept for
//! [`KEPT_FOR`] per number of weeks and config snapshot, and one read at a time is made: a
//! second request waits for the first's report instead of reading again. The page says when
//! it was generated.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{PreEscaped, html};
use serde::Deserialize;

use super::Console;
use super::pages::{LoggedIn, html, unavailable};
use super::templates::{Nav, shell};
use crate::config::TenantConfig;
use crate::report::Report;
use crate::store::StoreError;
use crate::words::Key;

/// How long a built report is shown again before the weeks are read anew.
pub(super) const KEPT_FOR: Duration = Duration::from_secs(60);

/// The last report built: for how many weeks, from which config snapshot, when.
struct Kept {
    weeks: u32,
    config: Arc<TenantConfig>,
    at: tokio::time::Instant,
    report: Arc<Report>,
}

/// The report kept for [`KEPT_FOR`]; its lock is held while a report is built (one read at a
/// time).
#[derive(Default)]
pub(crate) struct Cache(tokio::sync::Mutex<Option<Kept>>);

impl Cache {
    /// The report of the last `weeks` weeks under `config`: the kept one when fresh, else read.
    async fn report(
        &self,
        console: &Console,
        weeks: u32,
        config: &Arc<TenantConfig>,
    ) -> Result<Arc<Report>, StoreError> {
        let mut kept = self.0.lock().await;
        let now = console.clock.instant();
        if let Some(k) = kept
            .as_ref()
            .filter(|k| k.weeks == weeks && Arc::ptr_eq(&k.config, config) && now - k.at < KEPT_FOR)
        {
            return Ok(k.report.clone());
        }
        let sales = crate::sales::sales_keys(config);
        let store = console.service.store.as_ref();
        let mut report =
            crate::report::build(store, weeks, console.clock.now(), Some(&sales)).await?;
        report.business = Some(config.catalog.business_name.clone());
        let report = Arc::new(report);
        *kept = Some(Kept {
            weeks,
            config: config.clone(),
            at: now,
            report: report.clone(),
        });
        Ok(report)
    }
}

/// The weeks shown unless asked otherwise: the `report` command's default.
pub(super) const WEEKS: u32 = 4;
/// The most weeks a page reads.
pub(super) const MAX_WEEKS: u32 = 16;

#[derive(Deserialize, Default)]
pub(super) struct ReportQuery {
    #[serde(default)]
    weeks: Option<u32>,
}

pub(super) async fn page(
    State(console): State<Arc<Console>>,
    Query(query): Query<ReportQuery>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    let weeks = query.weeks.unwrap_or(WEEKS).clamp(1, MAX_WEEKS);
    let config = console.config.snapshot();
    let report = match console.report_cache.report(&console, weeks, &config).await {
        Ok(report) => report,
        Err(error) => return unavailable(&console, &error),
    };
    let w = console.words();
    let t = |key| w.text(key);
    let content = crate::report::html::content(&report, w.language);
    let csrf = console.sessions.csrf_token(&cookie);
    html(
        StatusCode::OK,
        shell(
            w,
            t(Key::ConNavReport),
            Nav::Report,
            &csrf,
            html! {
                form method="get" action="/console/report" class="inline" id="report-weeks" {
                    div {
                        label for="weeks" { (t(Key::ConReportWeeks)) }
                        select id="weeks" name="weeks" {
                            @for n in [1, 4, 8, 12, MAX_WEEKS] {
                                option value=(n) selected[n == weeks] { (n) }
                            }
                        }
                    }
                    button type="submit" class="quiet" { (t(Key::ConShow)) }
                }
                p class="hint" { (t(Key::ConReportIntro)) }
                // The report's own HTML, escaped where it is built (`report::html::esc`).
                div class="report" id="report" { (PreEscaped(content)) }
            },
        ),
    )
}
