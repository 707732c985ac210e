//! What the server knows of a contact's sales position, from its own records only (034 § The
//! intent field, 023 § Forward only, 028 § Stored offering).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Intent, Stage, stage_of};
use crate::config::TenantConfig;
use crate::store::{Conversation, SalesRecord, Store, StoreError};

/// The contact's position at the start of a turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Known {
    /// The last performed intent write; `prospect` also by the rollout rule.
    pub intent: Intent,
    /// The last performed funnel stage.
    pub stage: Option<Stage>,
    /// Flows performed for the contact within the history window (023: sent once).
    pub sent_flows: HashSet<String>,
    /// The turn's offering: the request's (a catalog id), else the later of the stored one and
    /// the last performed write to the offering field; one the catalog dropped counts as none.
    pub offering: Option<String>,
    /// The offering came from a token-bound request (an advert's entry flow), not the agent's
    /// write (034: it counts as a reason to record `prospect`).
    pub advert_offering: bool,
    /// The offering the model last saw, when the request brings a different one (028: the
    /// model confirms which one the contact wants).
    pub offering_changed_from: Option<String>,
    /// What to store on the conversation (028): a bound request's offering, or a performed
    /// write newer than the stored value.
    pub store_offering: Option<(String, DateTime<Utc>)>,
    /// The contact had its opening, or a prospect turn already (032 A, 034): it never gets the
    /// opening again (`opening::spends_opening`).
    pub opening_spent: bool,
}

/// One performed entry's facts, read from a record.
fn performed(entry: &Value) -> Option<(&str, &str, Option<&str>)> {
    if entry.get("status").and_then(Value::as_str) != Some("performed") {
        return None;
    }
    let tool = entry.get("tool").and_then(Value::as_str)?;
    let id = entry.get("id").and_then(Value::as_str)?;
    Some((tool, id, entry.get("value").and_then(Value::as_str)))
}

/// What the request carried (028): its offering, already normalised by the HTTP layer, and
/// whether it was token-bound (only a bound request stores one).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub offering: Option<&'a str>,
    pub bound: bool,
    pub now: DateTime<Utc>,
}

/// The contact's position from `record` (pure).
pub fn from_record(config: &TenantConfig, record: &SalesRecord, request: Request<'_>) -> Known {
    let mut known = Known::default();
    let tools = config.tools.as_ref();
    let history_since = request.now - chrono::Duration::days(i64::from(config.rules.history_days));
    let intent_id = tools.and_then(super::intent_field).map(|f| f.id.as_str());
    let funnel_id = tools.and_then(super::funnel_field).map(|f| f.id.as_str());
    let offering_id = tools.and_then(super::offering_field).map(|f| f.id.as_str());
    let mut written: Option<(String, DateTime<Utc>)> = None;
    for turn in &record.actions {
        let Some(entries) = turn.actions.as_array() else {
            continue;
        };
        known.opening_spent |= entries
            .iter()
            .any(|entry| super::opening::spends_opening(entry, intent_id));
        for (tool, id, value) in entries.iter().filter_map(performed) {
            match (tool, value) {
                ("set_field", Some(value)) if Some(id) == intent_id => {
                    if let Some(intent) = Intent::from_value(value) {
                        known.intent = intent;
                    }
                }
                ("set_field", Some(value)) if Some(id) == funnel_id => {
                    if let Some(stage) = stage_of(value) {
                        known.stage = Some(stage);
                    }
                }
                ("set_field", Some(value)) if Some(id) == offering_id => {
                    written = Some((value.to_owned(), turn.at));
                }
                ("send_flow", _) if turn.at >= history_since => {
                    known.sent_flows.insert(id.to_owned());
                }
                _ => {}
            }
        }
    }
    // 034 § Rollout rule: a contact whose funnel moved past `new` is a prospect.
    if known.stage.is_some_and(|s| s > 0) {
        known.intent = Intent::Prospect;
    }

    let in_catalog = |id: &str| config.catalog.offerings.iter().any(|o| o.id == id);
    let stored = record.offering.clone();
    // The later of the stored value and the last performed write is the contact's offering.
    let (latest, from_request_before) = match (&stored, &written) {
        (Some(s), Some(w)) if w.1 > s.1 => (Some(w.clone()), false),
        (Some(s), _) => (Some(s.clone()), true),
        (None, Some(w)) => (Some(w.clone()), false),
        (None, None) => (None, false),
    };
    if let Some(latest) = &latest
        && !from_request_before
        && stored.as_ref().is_none_or(|s| s.0 != latest.0)
    {
        known.store_offering = Some(latest.clone());
    }
    let written_value = written.as_ref().map(|w| w.0.as_str());
    match request.offering.filter(|o| in_catalog(o)) {
        Some(inbound) => {
            // 028: inbound wins; only a bound request stores it or counts as an advert.
            if request.bound {
                if latest.as_ref().is_none_or(|l| l.0 != inbound) {
                    known.store_offering = Some((inbound.to_owned(), request.now));
                }
                known.advert_offering = written_value != Some(inbound);
            }
            if let Some(previous) = latest.as_ref().filter(|l| l.0 != inbound) {
                known.offering_changed_from = in_catalog(&previous.0).then(|| previous.0.clone());
            }
            known.offering = Some(inbound.to_owned());
        }
        None => {
            if let Some((value, _)) = latest.filter(|l| in_catalog(&l.0)) {
                known.advert_offering = from_request_before && written_value != Some(&value);
                known.offering = Some(value);
            }
        }
    }
    known
}

/// The contact's position from its records (`record`, when the turn's one read brought them;
/// otherwise read here), storing the offering when it changed (028). A tenant whose config has
/// nothing the records would decide reads nothing, and neither does an unbound turn (019: it
/// knows only its own message, so no recorded intent, stage, offering or sent flow opens a gate
/// for it; its own writes in the turn still count).
pub async fn read(
    store: &dyn Store,
    config: &TenantConfig,
    conversation: &Conversation,
    record: Option<SalesRecord>,
    request: Request<'_>,
) -> Result<Known, StoreError> {
    if !request.bound || !super::reads_records(config.tools.as_ref()) {
        // Nothing to read: the request's offering still names the turn's (028).
        let mut known = from_record(config, &SalesRecord::default(), request);
        known.store_offering = None;
        return Ok(known);
    }
    let record = match record {
        Some(record) => record,
        None => store.sales_record(conversation.id).await?,
    };
    let known = from_record(config, &record, request);
    if let Some((offering, at)) = &known.store_offering {
        store.set_offering(conversation.id, offering, *at).await?;
    }
    Ok(known)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::ActionRecord;

    fn demo() -> TenantConfig {
        crate::config::examples::demo_tenant()
    }

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_000_000, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    fn request(offering: Option<&str>, bound: bool) -> Request<'_> {
        Request {
            offering,
            bound,
            now: at(60),
        }
    }

    #[test]
    fn spec_034_verification_5_an_offering_from_a_bound_request_is_the_adverts_an_unbound_ones_is_not()
     {
        let config = demo();
        let bound = from_record(
            &config,
            &SalesRecord::default(),
            request(Some("glaze-lab"), true),
        );
        assert!(bound.advert_offering);
        assert_eq!(bound.store_offering, Some(("glaze-lab".into(), at(60))));
        let unbound = from_record(
            &config,
            &SalesRecord::default(),
            request(Some("glaze-lab"), false),
        );
        assert_eq!(
            unbound.offering.as_deref(),
            Some("glaze-lab"),
            "it still narrows the turn"
        );
        assert!(
            !unbound.advert_offering,
            "a forged request cannot make an advert"
        );
        assert_eq!(unbound.store_offering, None, "and is not stored");
        // One the agent wrote is not an advert's.
        let written = SalesRecord {
            offering: None,
            actions: vec![ActionRecord {
                at: at(1),
                actions: json!([{"tool": "set_field", "id": "course", "value": "glaze-lab", "status": "performed"}]),
            }],
        };
        let known = from_record(&config, &written, request(None, true));
        assert_eq!(known.offering.as_deref(), Some("glaze-lab"));
        assert!(!known.advert_offering);
    }

    #[test]
    fn spec_034_verification_3_intent_is_the_last_performed_write_never_a_staged_failed_or_refused_one()
     {
        let config = demo();
        let record = SalesRecord {
            offering: None,
            actions: vec![
                ActionRecord {
                    at: at(1),
                    actions: json!([{"tool": "set_field", "id": "intent", "value": "not_prospect", "status": "performed"}]),
                },
                ActionRecord {
                    at: at(2),
                    actions: json!([
                        {"tool": "set_field", "id": "intent", "value": "prospect", "status": "discarded"},
                        {"tool": "set_field", "id": "intent", "value": "prospect", "status": "failed"},
                        {"tool": "set_field", "id": "intent", "value": "prospect", "status": "refused", "reason": "prospect_final"},
                        {"tool": "set_field", "id": "funnel_stage", "value": "offered", "status": "refused", "reason": "not_prospect"},
                        {"tool": "send_flow", "id": "glaze_lab_guide", "status": "refused", "reason": "other_offering"}
                    ]),
                },
            ],
        };
        let known = from_record(&config, &record, request(None, true));
        assert_eq!(known.intent, Intent::NotProspect);
        assert_eq!(known.stage, None);
        assert!(known.sent_flows.is_empty(), "a refused flow was not sent");
    }

    #[test]
    fn spec_023_sent_once_is_within_the_history_window() {
        let config = demo();
        let flow = |minutes| ActionRecord {
            at: at(minutes),
            actions: json!([{"tool": "send_flow", "id": "glaze_lab_guide", "status": "performed"}]),
        };
        let window = i64::from(config.rules.history_days) * 24 * 60;
        let old = SalesRecord {
            offering: None,
            actions: vec![flow(60 - window - 1)],
        };
        assert!(
            from_record(&config, &old, request(None, true))
                .sent_flows
                .is_empty()
        );
        let recent = SalesRecord {
            offering: None,
            actions: vec![flow(0)],
        };
        assert!(
            from_record(&config, &recent, request(None, true))
                .sent_flows
                .contains("glaze_lab_guide")
        );
    }
}
