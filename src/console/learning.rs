//! `GET /console/learning`: the learning review (031) in the console, for a tenant with
//! `rules.json` `learning` (else the page says how to turn it on, and the POSTs answer 409).
//!
//! - The proposals waiting, each with the evidence `insights review --list` prints (its run and
//!   that run's cohort, the counts on each side, the cited turns) and the cited turns quoted as
//!   the analyst read them (`learning::transcript::cleaned`: names, links, emails and phone
//!   numbers removed).
//! - Approve (as written or edited) and reject with a reason: `POST /console/learning/approve`
//!   and `/reject` call `learning::review::apply`, the CLI's own function, recorded as decided
//!   by `console` (`review::BY_CONSOLE`; the CLI records `cli`). A reject needs a reason.
//! - Take a version live: `POST /console/learning/activate` calls `learning::gate::activate`,
//!   the CLI's own gate, against the golden suite at `gate::DEFAULT_SUITE` (the CLI's default,
//!   relative to the working directory); a version live before goes back without the gate (the
//!   rollback).
//! - The decisions recorded (`learning_decisions`): what, who, when, why.
//!
//! A POST that succeeds redirects to the page with `?done=` (fixed words); one refused renders
//! the page with the refusal (409, or 400 for a missing reason) and changes nothing. A double
//! click finds the proposal decided and is told so: `apply` reads it as no longer pending.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::Console;
use super::pages::{LoggedIn, Refused, checked_post, html, redirect, unavailable};
use super::templates::{Nav, shell, slots};
use super::turn_view::{inert, when};
use crate::learning::gate::{self, Activated};
use crate::learning::review::{self, BY_CLI, BY_CONSOLE, Decision};
use crate::learning::transcript;
use crate::store::learning::{
    DecisionKind, LearningDecision, LearningRun, PlaybookVersion, Proposal, ProposalStatus,
};
use crate::store::{Role, Store, StoreError};
use crate::words::{Key, Words};

/// Proposals the page shows (a run keeps at most 5).
const SHOWN_PROPOSALS: i64 = 50;
/// Cited turns quoted per proposal.
const QUOTED_TURNS: usize = 5;
/// Decisions the page lists.
const SHOWN_DECISIONS: i64 = 50;
/// Runs read to find each proposal's.
const RUNS_READ: i64 = 100;

#[derive(Deserialize, Default)]
pub(super) struct DoneQuery {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

/// What the last POST did, shown above the page.
enum Outcome {
    /// Done: `?done=` and the version it names.
    Done(Key, Option<String>),
    /// Refused: a fixed reason, or the review's or gate's own words (operator English).
    Refused(Option<Key>, String),
}

/// A proposal as the page shows it: its run and its quotes.
struct Shown {
    proposal: Proposal,
    run: Option<LearningRun>,
    /// Each cited turn: its id and, when still stored, its role and cleaned text.
    quotes: Vec<(String, Option<(Role, String)>)>,
}

/// Everything the page reads.
struct Read {
    pending: Vec<Shown>,
    versions: Vec<PlaybookVersion>,
    decisions: Vec<LearningDecision>,
}

pub(super) async fn page(
    State(console): State<Arc<Console>>,
    Query(query): Query<DoneQuery>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    let done = query.done.as_deref().and_then(done_key).map(|key| {
        let version = query
            .version
            .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_hexdigit()));
        Outcome::Done(key, version)
    });
    render(&console, &cookie, StatusCode::OK, done).await
}

fn done_key(done: &str) -> Option<Key> {
    Some(match done {
        "approved" => Key::ConDoneApproved,
        "unchanged" => Key::ConDoneUnchanged,
        "rejected" => Key::ConDoneRejected,
        "activated" => Key::ConDoneActivated,
        "rolled_back" => Key::ConDoneRolledBack,
        "already_active" => Key::ConDoneAlreadyActive,
        _ => return None,
    })
}

async fn render(
    console: &Console,
    cookie: &str,
    status: StatusCode,
    outcome: Option<Outcome>,
) -> Response {
    let config = console.config.snapshot();
    let w = console.words();
    let csrf = console.sessions.csrf_token(cookie);
    let on = config.rules.learning.is_some();
    let read = if on {
        match read(console.service.store.as_ref()).await {
            Ok(read) => Some(read),
            Err(error) => return unavailable(console, &error),
        }
    } else {
        None
    };
    html(
        status,
        shell(
            w,
            w.text(Key::ConLearningTitle),
            Nav::Learning,
            &csrf,
            html! {
                h1 { (w.text(Key::ConLearningTitle)) }
                @if let Some(outcome) = &outcome { (outcome_line(w, outcome)) }
                @match &read {
                    None => p id="learning-off" { (w.text(Key::ConLearningOff)) },
                    Some(read) => (review_page(w, &csrf, read)),
                }
            },
        ),
    )
}

async fn read(store: &dyn Store) -> Result<Read, StoreError> {
    let proposals = store
        .proposals(ProposalStatus::Pending, SHOWN_PROPOSALS)
        .await?;
    let runs = store.learning_runs(RUNS_READ).await?;
    let mut pending = Vec::with_capacity(proposals.len());
    for proposal in proposals {
        let mut quotes = Vec::new();
        for id in proposal.turn_ids.iter().take(QUOTED_TURNS) {
            quotes.push((id.clone(), quote(store, id).await?));
        }
        pending.push(Shown {
            run: runs.iter().find(|r| r.id == proposal.run_id).cloned(),
            proposal,
            quotes,
        });
    }
    Ok(Read {
        pending,
        versions: store.playbook_versions().await?,
        decisions: store.learning_decisions(SHOWN_DECISIONS).await?,
    })
}

/// A cited turn as the analyst read it: the names said in its conversation removed, cleaned as
/// a note is. `None` when it is no longer stored (retention, a forgotten contact) or empty.
async fn quote(store: &dyn Store, id: &str) -> Result<Option<(Role, String)>, StoreError> {
    let Ok(id) = id.trim().parse::<i64>() else {
        return Ok(None);
    };
    let Some(turn) = store.turn(id).await? else {
        return Ok(None);
    };
    let conversation = store.turns(turn.conversation_id).await?;
    let names = transcript::names_of(&conversation);
    Ok(transcript::cleaned(&turn, &names).map(|text| (turn.role, text)))
}

fn outcome_line(w: Words, outcome: &Outcome) -> Markup {
    match outcome {
        Outcome::Done(key, version) => {
            let version = version.as_deref().map(gate::short).unwrap_or_default();
            html! { p class="ok" role="status" id="done" { (w.fill(*key, &[version])) } }
        }
        Outcome::Refused(key, why) => html! {
            section class="error" role="alert" id="refused" {
                p { (w.text(Key::ConNotDone)) }
                @if let Some(key) = key { p { (w.text(*key)) } }
                @if !why.is_empty() { p { code { (why) } } }
            }
        },
    }
}

fn review_page(w: Words, csrf: &str, read: &Read) -> Markup {
    let t = |key| w.text(key);
    html! {
        p class="hint" { (t(Key::ConLearningIntro)) }
        section aria-labelledby="pending-title" id="pending" {
            h2 id="pending-title" { (t(Key::ConPendingTitle)) }
            @if read.pending.is_empty() {
                p id="no-pending" { (t(Key::ConNoPending)) }
            } @else {
                p class="hint" { (t(Key::ConApproveHint)) }
            }
            @for shown in &read.pending { (proposal(w, csrf, shown)) }
        }
        (versions(w, csrf, &read.versions))
        (decisions(w, &read.decisions))
    }
}

fn proposal(w: Words, csrf: &str, shown: &Shown) -> Markup {
    let t = |key| w.text(key);
    let p = &shown.proposal;
    let id = p.id.to_string();
    html! {
        article class="proposal" data-proposal=(p.id) aria-labelledby={ "proposal-" (p.id) } {
            h3 id={ "proposal-" (p.id) } { (w.fill(Key::ConProposal, &[&id])) }
            p class="text" { (inert(&p.text)) }
            dl {
                dt { (t(Key::ConWhyProposed)) } dd { (inert(&p.rationale)) }
            }
            p data-part="cohort" {
                (w.fill(Key::ConCohort, &[&p.converted_count.to_string(), &p.not_converted_count.to_string()]))
                @if let Some(run) = &shown.run {
                    " " (w.fill(Key::ConRunOf, &[
                        &crate::words::date(w.language, run.started_at.date_naive()),
                        &run.converted_count.to_string(),
                        &run.not_converted_count.to_string(),
                    ]))
                }
            }
            @if !shown.quotes.is_empty() {
                p class="hint" { (t(Key::ConQuotes)) }
                @for (turn, quote) in &shown.quotes {
                    @match quote {
                        Some((role, text)) => blockquote data-turn=(turn) {
                            strong { @if *role == Role::User { (t(Key::ConRoleContact)) } @else { (t(Key::ConRoleAgent)) } } ": " (inert(text))
                        },
                        None => p class="hint" data-turn=(turn) { (w.fill(Key::ConQuoteGone, &[turn])) },
                    }
                }
            }
            form method="post" action="/console/learning/approve" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="proposal" value=(p.id);
                label for={ "text-" (p.id) } { (t(Key::ConEditLabel)) }
                input type="text" id={ "text-" (p.id) } name="text" maxlength="280";
                label for={ "approve-reason-" (p.id) } { (t(Key::ConReasonLabel)) }
                input type="text" id={ "approve-reason-" (p.id) } name="reason" maxlength="500";
                button type="submit" data-action="approve" { (t(Key::ConApprove)) }
            }
            form method="post" action="/console/learning/reject" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="proposal" value=(p.id);
                label for={ "reject-reason-" (p.id) } { (t(Key::ConReasonLabel)) }
                input type="text" id={ "reject-reason-" (p.id) } name="reason" maxlength="500" required;
                button type="submit" class="reject" data-action="reject" { (t(Key::ConReject)) }
            }
        }
    }
}

fn versions(w: Words, csrf: &str, versions: &[PlaybookVersion]) -> Markup {
    let t = |key| w.text(key);
    html! {
        section aria-labelledby="versions-title" id="versions" {
            h2 id="versions-title" { (t(Key::ConVersionsTitle)) }
            @if !versions.iter().any(|v| v.active) { p id="none-active" { (t(Key::ConNoneActive)) } }
            @if versions.is_empty() { p { (t(Key::ConNoVersions)) } }
            ul class="rows" {
                @for v in versions.iter().rev() {
                    @let state = match (v.active, v.activated_at) {
                        (true, _) => Key::ConVersionActive,
                        (false, Some(_)) => Key::ConVersionWasActive,
                        (false, None) => Key::ConVersionNeverActive,
                    };
                    li data-version=(v.content_hash) data-active=(v.active) {
                        (slots(t(Key::ConVersionLine), &[
                            html! { code { (gate::short(&v.content_hash)) } },
                            html! { (v.insights.len()) },
                            html! { strong { (t(state)) } },
                        ]))
                        ol { @for insight in &v.insights { li { (inert(insight)) } } }
                        @if !v.active {
                            form method="post" action="/console/learning/activate" {
                                input type="hidden" name="csrf" value=(csrf);
                                input type="hidden" name="version" value=(v.content_hash);
                                @if v.activated_at.is_some() {
                                    button type="submit" class="quiet" data-action="rollback" { (t(Key::ConRollBack)) }
                                } @else {
                                    button type="submit" data-action="activate" { (t(Key::ConActivate)) }
                                }
                            }
                        }
                    }
                }
            }
            p class="hint" { (slots(t(Key::ConGateHint), &[html! { code { (gate::DEFAULT_SUITE) } }])) }
        }
    }
}

fn decisions(w: Words, decisions: &[LearningDecision]) -> Markup {
    let t = |key| w.text(key);
    html! {
        section aria-labelledby="decisions-title" id="decisions" {
            h2 id="decisions-title" { (t(Key::ConDecisionsTitle)) }
            @if decisions.is_empty() { p { (t(Key::ConNoDecisions)) } }
            ul class="rows" {
                @for d in decisions {
                    li data-decision=(d.kind.as_str()) data-by=(d.by) {
                        (w.fill(Key::ConDecBy, &[&when(w, d.at), &what(w, d), &by(w, &d.by)]))
                        @if let Some(reason) = &d.reason { br; span class="hint" { (inert(reason)) } }
                    }
                }
            }
        }
    }
}

/// A decision in words: "rejected proposal 12", "took version 3f2a9c01ab12 live".
fn what(w: Words, d: &LearningDecision) -> String {
    let proposal = d.proposal_id.map(|id| id.to_string()).unwrap_or_default();
    let version = d
        .version_hash
        .as_deref()
        .map(gate::short)
        .unwrap_or_default();
    match d.kind {
        DecisionKind::Approved => w.fill(Key::ConDecApproved, &[&proposal]),
        DecisionKind::Rejected => w.fill(Key::ConDecRejected, &[&proposal]),
        DecisionKind::Retired => w.fill(
            Key::ConDecRetired,
            &[&d.place.map(|p| p.to_string()).unwrap_or_default()],
        ),
        DecisionKind::Activated => w.fill(Key::ConDecActivated, &[version]),
        DecisionKind::RolledBack => w.fill(Key::ConDecRolledBack, &[version]),
    }
}

fn by(w: Words, by: &str) -> String {
    match by {
        BY_CONSOLE => w.text(Key::ConByConsole).to_owned(),
        BY_CLI => w.text(Key::ConByCli).to_owned(),
        other => other.to_owned(),
    }
}

#[derive(Deserialize)]
pub(super) struct DecisionForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    proposal: String,
    /// Approve: the tactic as edited (empty: as written).
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// Why a learning POST was refused before it did anything.
enum Unfit {
    Post(Refused),
    LearningOff,
    NoProposal,
}

impl IntoResponse for Unfit {
    fn into_response(self) -> Response {
        match self {
            Self::Post(refused) => refused.into_response(),
            Self::LearningOff => (
                StatusCode::CONFLICT,
                "learning: rules.json has no learning section",
            )
                .into_response(),
            Self::NoProposal => {
                (StatusCode::BAD_REQUEST, "proposal: must be a proposal id").into_response()
            }
        }
    }
}

/// A POST's checks: the session and token, and learning on.
fn checked<'a>(
    console: &Console,
    headers: &'a HeaderMap,
    csrf: Option<&str>,
) -> Result<&'a str, Unfit> {
    let cookie = checked_post(console, headers, csrf).map_err(Unfit::Post)?;
    if console.config.snapshot().rules.learning.is_none() {
        return Err(Unfit::LearningOff);
    }
    Ok(cookie)
}

/// [`checked`], and the form's proposal id.
fn checked_decision<'a>(
    console: &Console,
    headers: &'a HeaderMap,
    form: &DecisionForm,
) -> Result<(&'a str, i64), Unfit> {
    let cookie = checked(console, headers, form.csrf.as_deref())?;
    let id = form
        .proposal
        .trim()
        .parse()
        .map_err(|_| Unfit::NoProposal)?;
    Ok((cookie, id))
}

/// `POST /console/learning/approve`: the CLI's `apply`, decided by `console`.
pub(super) async fn approve(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<DecisionForm>,
) -> Response {
    let (cookie, id) = match checked_decision(&console, &headers, &form) {
        Ok(checked) => checked,
        Err(unfit) => return unfit.into_response(),
    };
    let decision = Decision::Approve {
        id,
        text: form.text.filter(|t| !t.trim().is_empty()),
        reason: form.reason,
    };
    let store = console.service.store.as_ref();
    match review::apply(store, &[decision], BY_CONSOLE, console.clock.now()).await {
        Ok(reviewed) => {
            tracing::info!(proposal = id, "console: learning proposal approved");
            match reviewed.version {
                Some((hash, _)) => {
                    redirect(&format!("/console/learning?done=approved&version={hash}"))
                }
                None => redirect("/console/learning?done=unchanged"),
            }
        }
        Err(why) => refused(&console, cookie, why).await,
    }
}

/// `POST /console/learning/reject`: the CLI's `apply`, with the reason the form requires.
pub(super) async fn reject(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<DecisionForm>,
) -> Response {
    let (cookie, id) = match checked_decision(&console, &headers, &form) {
        Ok(checked) => checked,
        Err(unfit) => return unfit.into_response(),
    };
    let Some(reason) = form.reason.filter(|r| !r.trim().is_empty()) else {
        let outcome = Outcome::Refused(Some(Key::ConReasonNeeded), String::new());
        return render(&console, cookie, StatusCode::BAD_REQUEST, Some(outcome)).await;
    };
    let decision = Decision::Reject {
        id,
        reason: Some(reason),
    };
    let store = console.service.store.as_ref();
    match review::apply(store, &[decision], BY_CONSOLE, console.clock.now()).await {
        Ok(_) => {
            tracing::info!(proposal = id, "console: learning proposal rejected");
            redirect("/console/learning?done=rejected")
        }
        Err(why) => refused(&console, cookie, why).await,
    }
}

#[derive(Deserialize)]
pub(super) struct ActivateForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    version: String,
}

/// `POST /console/learning/activate`: the CLI's gate (or its rollback), decided by `console`.
pub(super) async fn activate(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<ActivateForm>,
) -> Response {
    let cookie = match checked(&console, &headers, form.csrf.as_deref()) {
        Ok(cookie) => cookie,
        Err(unfit) => return unfit.into_response(),
    };
    let suite = tokio::task::spawn_blocking(|| gate::suite_hash(gate::DEFAULT_SUITE.as_ref()))
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the read stopped")));
    let suite = match suite {
        Ok(suite) => suite,
        Err(error) => {
            let why = format!(
                "cannot read the golden suite {}: {error}",
                gate::DEFAULT_SUITE
            );
            return refused(&console, cookie, why).await;
        }
    };
    let store = console.service.store.as_ref();
    let now = console.clock.now();
    match gate::activate(store, form.version.trim(), &suite, BY_CONSOLE, now).await {
        Ok(activated) => {
            let (done, hash) = match activated {
                Activated::Gated { hash } => ("activated", hash),
                Activated::RolledBack { hash } => ("rolled_back", hash),
                Activated::AlreadyActive { hash } => ("already_active", hash),
            };
            tracing::info!(
                version = gate::short(&hash),
                done,
                "console: playbook version"
            );
            redirect(&format!("/console/learning?done={done}&version={hash}"))
        }
        Err(why) => refused(&console, cookie, why).await,
    }
}

/// The page with the review's or the gate's refusal: nothing changed.
async fn refused(console: &Console, cookie: &str, why: String) -> Response {
    let outcome = Outcome::Refused(None, why);
    render(console, cookie, StatusCode::CONFLICT, Some(outcome)).await
}
