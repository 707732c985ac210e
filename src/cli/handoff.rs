//! Why `simulate`'s reply was the handoff copy: read back from the service's database,
//! the demo's SQLite file by default, so the service logs no contact data to say it.
//!
//! The response carries only the copy; the turn's record says how it ended, and for a check
//! before the model (`escalated_precheck`) the stored counters say which check, taken in the
//! order the turn takes them: escalation keywords, the turn cap, the hourly rate, the budget.
//! Best effort: without the database, or for a reply still on its way, it says nothing.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::config::{ConfigContext, Language, TenantConfig};
use crate::ids::SubscriberId;
use crate::store::{Role, Store};
use crate::words::{Key, fill, text};

/// The owner's language of the tenant config as the demo loads it (English without one).
fn language(config: Option<&TenantConfig>) -> Language {
    config.map_or(Language::default(), |c| c.rules.owner_language)
}

/// One line on why the contact's latest reply handed it to a person, or `None`.
pub(super) async fn explain(
    env: &HashMap<String, String>,
    subscriber: &SubscriberId,
) -> Option<String> {
    let store = super::existing_store(env).await.ok()?;
    let conversation = store.conversation_by_subscriber(subscriber).await.ok()??;
    let turns = store.turns(conversation.id).await.ok()?;
    let reply = turns.last().filter(|turn| turn.role == Role::Agent)?;
    let outcome = reply.outcome.as_deref()?;
    if !outcome.starts_with("escalated") {
        return None;
    }
    let config = tenant_config(env);
    let lang = language(config.as_ref());
    if outcome != "escalated_precheck" {
        return Some(fill(
            lang,
            Key::SimHandoffEnded,
            &[outcome, &conversation.id.to_string()],
        ));
    }
    let message = turns.iter().rev().find(|turn| turn.role == Role::User)?;
    let why = match &config {
        Some(config) => {
            precheck(
                store.as_ref(),
                config,
                &conversation.id,
                subscriber,
                &message.text,
                message.bound,
                message.created_at,
            )
            .await
        }
        None => None,
    };
    let why = why.unwrap_or_else(|| text(lang, Key::SimHandoffSomeCheck).to_owned());
    Some(fill(lang, Key::SimHandoffBeforeModel, &[&why]))
}

/// When the contact's latest message was held for a person (`crate::handoff`): what happened
/// and how to hand the contact back. `None` for any other turn, or without the database.
pub(super) async fn held(
    env: &HashMap<String, String>,
    subscriber: &SubscriberId,
) -> Option<Vec<String>> {
    let store = super::existing_store(env).await.ok()?;
    let conversation = store.conversation_by_subscriber(subscriber).await.ok()??;
    let turns = store.turns(conversation.id).await.ok()?;
    let last = turns.last().filter(|turn| turn.role == Role::Agent)?;
    if last.outcome.as_deref() != Some(crate::handoff::HELD_OUTCOME) {
        return None;
    }
    let since = conversation.escalated_at?;
    let config = tenant_config(env);
    let lang = language(config.as_ref());
    let until = config.as_ref().and_then(|c| {
        match crate::handoff::hold_at(&conversation, crate::handoff::hold_hours(c), Utc::now()) {
            crate::handoff::Hold::Held { until, .. } => Some(until),
            _ => None,
        }
    });
    let tag = config
        .as_ref()
        .and_then(|c| c.rules.handoff.as_ref())
        .and_then(|h| h.tag.clone());
    let at = |time: DateTime<Utc>| time.format("%Y-%m-%d %H:%M UTC").to_string();
    let mut lines = vec![fill(lang, Key::SimHeldSince, &[&at(since)])];
    let mut ends = Vec::new();
    if let Some(until) = until {
        ends.push(fill(lang, Key::SimHoldEndsAt, &[&at(until)]));
    }
    if let Some(tag) = tag {
        ends.push(fill(lang, Key::SimHoldEndsTag, &[&tag]));
    }
    ends.push(text(lang, Key::SimHoldEndsRelease).to_owned());
    lines.push(fill(
        lang,
        Key::SimHoldEnds,
        &[&ends.join(&format!(", {} ", text(lang, Key::SimHoldOr)))],
    ));
    lines.push(fill(
        lang,
        Key::SimHandBack,
        &[
            subscriber.as_str(),
            crate::http::RELEASE_PATH,
            subscriber.as_str(),
        ],
    ));
    Some(lines)
}

/// The tenant config as the demo loads it (`CONFIG_DIR`, the examples allowed).
pub(super) fn tenant_config(env: &HashMap<String, String>) -> Option<TenantConfig> {
    let dir = env
        .get("CONFIG_DIR")
        .filter(|v| !v.trim().is_empty())
        .map_or("config", |v| v.as_str());
    let context = ConfigContext {
        allow_examples: true,
        ..ConfigContext::default()
    };
    crate::config::load_dir(Path::new(dir), &context).ok()
}

/// Which pre-model check stopped the message sent at `at`.
async fn precheck(
    store: &dyn Store,
    config: &TenantConfig,
    conversation: &crate::ids::ConversationId,
    subscriber: &SubscriberId,
    message: &str,
    bound: bool,
    at: DateTime<Utc>,
) -> Option<String> {
    let rules = &config.rules;
    let lang = rules.owner_language;
    if rules.escalation_keyword_hit(message) {
        return Some(text(lang, Key::SimWhyKeyword).to_owned());
    }
    let cap = rules.max_turns_per_conversation;
    let idle_hours = rules.idle_reset_hours;
    let times = store
        .recent_user_turn_times(*conversation, i64::from(cap) + 1)
        .await
        .ok()?;
    let run = messages_without_pause(&times, TimeDelta::hours(i64::from(idle_hours)));
    if bound && run > u64::from(cap) {
        return Some(fill(
            lang,
            Key::SimWhyTurnCap,
            &[&cap.to_string(), &idle_hours.to_string()],
        ));
    }
    let hour = at.duration_trunc(TimeDelta::hours(1)).ok()?;
    let count = store.rate_count(subscriber, hour).await.ok()?;
    let limit = rules.rate_limit.turns_per_subscriber_per_hour;
    if count > i64::from(limit) {
        return Some(fill(
            lang,
            Key::SimWhyRate,
            &[&count.to_string(), &limit.to_string()],
        ));
    }
    let spent = store.budget(at.date_naive()).await.ok()?;
    if spent.tokens >= i64::try_from(rules.budget.daily_token_cap).unwrap_or(i64::MAX)
        || spent.cost_usd >= rules.budget.daily_cost_cap_usd
    {
        return Some(text(lang, Key::SimWhyBudget).to_owned());
    }
    None
}

/// The messages at the head of `times` (newest first) with no gap of `idle` between them.
fn messages_without_pause(times: &[DateTime<Utc>], idle: TimeDelta) -> u64 {
    let mut run = u64::from(!times.is_empty());
    for pair in times.windows(2) {
        if pair[0] - pair[1] >= idle {
            break;
        }
        run += 1;
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `simulate`'s explanation of a handoff speaks the owner's language (`ownerLanguage`).
    #[tokio::test]
    async fn simulate_explains_a_keyword_handoff_in_the_owners_language() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = crate::store::sqlite::SqliteStore::connect(&url)
            .await
            .unwrap();
        let mut config = crate::config::examples::demo_tenant();
        let subscriber = SubscriberId::parse("5550123").unwrap();
        let conversation = uuid::Uuid::new_v4();
        let keyword = config.rules.escalation_keywords[0].clone();
        let mut said = Vec::new();
        for language in Language::ALL {
            config.rules.owner_language = language;
            let why = precheck(
                &store,
                &config,
                &conversation,
                &subscriber,
                &keyword,
                true,
                Utc::now(),
            )
            .await;
            assert_eq!(why.as_deref(), Some(text(language, Key::SimWhyKeyword)));
            said.push(why.unwrap());
        }
        assert!(said[1].contains("rules.json") && said[1] != said[0] && said[2] != said[0]);
    }

    #[test]
    fn a_pause_of_the_idle_gap_ends_the_run() {
        let at = |h: i64| DateTime::<Utc>::UNIX_EPOCH + TimeDelta::hours(h);
        let idle = TimeDelta::hours(24);
        assert_eq!(messages_without_pause(&[], idle), 0);
        assert_eq!(messages_without_pause(&[at(50), at(49), at(48)], idle), 3);
        assert_eq!(messages_without_pause(&[at(50), at(49), at(25)], idle), 2);
        assert_eq!(messages_without_pause(&[at(50), at(26), at(25)], idle), 1);
    }
}
