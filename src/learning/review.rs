//! The review (031 § Review): a person approves a pending proposal as written or edited,
//! rejects one, or retires an insight of the active playbook. The decisions of one review make
//! one new immutable version (the active one's insights, less the retired, plus the approved, in
//! that order), named by its content hash and not active until `insights activate`. A review
//! that only rejects makes no version.
//!
//! Every decision is recorded with who made it ([`BY_CLI`], [`BY_CONSOLE`]), when, and the
//! reviewer's reason when one was given (at most [`MAX_REASON`] characters, cleaned as a note
//! is: links, email addresses and phone numbers removed). The `insights` commands and the
//! owner's console both call [`apply`]: one implementation.

use chrono::{DateTime, Utc};

use super::playbook::{bounds_problem, content_hash};
use super::proposals::{MAX_TEXT, text_refusal};
use crate::store::Store;
use crate::store::learning::{ProposalStatus, Review};

/// Who decided, as the decision is recorded: the `insights` commands…
pub const BY_CLI: &str = "cli";
/// …or the owner's console.
pub const BY_CONSOLE: &str = "console";
/// A reason's length, in characters.
pub const MAX_REASON: usize = 500;

/// One decision of a review.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Approve proposal `id`, as written or with the reviewer's `text`.
    Approve {
        id: i64,
        text: Option<String>,
        reason: Option<String>,
    },
    Reject {
        id: i64,
        reason: Option<String>,
    },
    /// Retire the active playbook's insight at this place (1 = first).
    Retire {
        place: usize,
    },
}

/// What a review wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    pub approved: usize,
    pub rejected: usize,
    pub retired: usize,
    /// The version it made, when it changed the playbook: its hash and insights.
    pub version: Option<(String, Vec<String>)>,
}

/// Applies `decisions` in one write. `Err` names what is wrong (an unknown or decided
/// proposal, an edited text that breaks a rule, a playbook over its bounds); nothing is written.
pub async fn apply(
    store: &dyn Store,
    decisions: &[Decision],
    by: &str,
    at: DateTime<Utc>,
) -> Result<Reviewed, String> {
    let read = |e: crate::store::StoreError| e.to_string();
    let pending = store
        .proposals(ProposalStatus::Pending, i64::MAX)
        .await
        .map_err(read)?;
    let active = store
        .active_playbook()
        .await
        .map_err(read)?
        .map(|v| v.insights)
        .unwrap_or_default();
    let mut review = Review {
        by: by.to_owned(),
        at,
        ..Review::default()
    };
    let mut retired = Vec::new();
    let mut added = Vec::new();
    for decision in decisions {
        match decision {
            Decision::Approve { id, text, reason } => {
                let proposal = pending
                    .iter()
                    .find(|p| p.id == *id)
                    .ok_or_else(|| not_pending(*id))?;
                let text = match text {
                    Some(edited) => checked_edit(edited)?,
                    None => proposal.text.clone(),
                };
                review.approved.push(*id);
                if let Some(reason) = checked_reason(reason.as_deref())? {
                    review.reasons.push((*id, reason));
                }
                added.push(text);
            }
            Decision::Reject { id, reason } => {
                pending
                    .iter()
                    .find(|p| p.id == *id)
                    .ok_or_else(|| not_pending(*id))?;
                review.rejected.push(*id);
                if let Some(reason) = checked_reason(reason.as_deref())? {
                    review.reasons.push((*id, reason));
                }
            }
            Decision::Retire { place } => {
                if *place == 0 || *place > active.len() {
                    return Err(format!(
                        "--retire {place}: the active playbook has {} insight(s), numbered from 1",
                        active.len()
                    ));
                }
                retired.push(*place - 1);
                review.retired.push(*place as i64);
            }
        }
    }
    let mut insights: Vec<String> = active
        .iter()
        .enumerate()
        .filter(|(i, _)| !retired.contains(i))
        .map(|(_, text)| text.clone())
        .collect();
    for text in added {
        if !insights.contains(&text) {
            insights.push(text);
        }
    }
    if insights != active {
        if let Some(problem) = bounds_problem(&insights) {
            return Err(problem);
        }
        review.version = Some((content_hash(&insights), insights));
    }
    store.record_review(&review).await.map_err(read)?;
    Ok(Reviewed {
        approved: review.approved.len(),
        rejected: review.rejected.len(),
        retired: retired.len(),
        version: review.version,
    })
}

fn not_pending(id: i64) -> String {
    format!("no pending proposal {id} (`manychat-agent insights review --list` lists them)")
}

/// A reason, trimmed and cleaned as a note is (links, email addresses and phone numbers
/// removed); `None` when empty. Over [`MAX_REASON`] characters is refused.
fn checked_reason(reason: Option<&str>) -> Result<Option<String>, String> {
    let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    if reason.chars().count() > MAX_REASON {
        return Err(format!("--reason must be at most {MAX_REASON} characters"));
    }
    Ok(crate::actions::NoteText::clean(reason, MAX_REASON).map(|clean| clean.as_str().to_owned()))
}

/// An edited text keeps the proposals' rules: 1 to 280 characters, no digit, currency symbol,
/// link, email address or phone number.
fn checked_edit(text: &str) -> Result<String, String> {
    let text = text.trim();
    let length = text.chars().count();
    if length == 0 || length > MAX_TEXT {
        return Err(format!("--text must be 1 to {MAX_TEXT} characters"));
    }
    if let Some(why) = text_refusal(text) {
        return Err(format!("--text {}: a tactic may not", why.describe()));
    }
    Ok(text.to_owned())
}
