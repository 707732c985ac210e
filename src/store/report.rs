//! What `manychat-agent report` reads from the store: one period's aggregates,
//! grouped by the database so a week of a busy store never leaves it row by row; only the
//! action records are tallied in the store's own code ([`ActionTally`], SQLite), which keeps
//! counts and drops each record once counted. Aggregates only leave the store: no subscriber
//! id, message text or note text is ever selected here.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::{Result, Role};

/// A period's aggregates (`Store::report_aggregates`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportAggregates {
    /// Contacts whose first turn (of either role) falls in the period.
    pub new_contacts: i64,
    /// Turns grouped by UTC day, role, outcome, escalation reason and whether the model wrote
    /// them; ordered by day.
    pub turn_groups: Vec<TurnGroup>,
    /// `latency_ms` of `answered_inline` agent turns: each distinct value with its count,
    /// ascending (exact percentiles without reading every row).
    pub inline_latencies: Vec<(i64, i64)>,
    /// Entries of `turns.actions` by tool and status.
    pub actions: Vec<ActionCount>,
}

/// Turns sharing a day, role, outcome, escalation reason and authorship.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnGroup {
    pub day: NaiveDate,
    pub role: Role,
    pub outcome: Option<String>,
    pub escalation_reason: Option<String>,
    /// The turn carries a model id: the model wrote it (an answer or a model's escalation).
    pub model_written: bool,
    pub turns: i64,
    pub reads: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
}

/// How many recorded actions had this tool and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCount {
    pub tool: String,
    pub status: String,
    pub count: i64,
}

/// The tenant's sales ids the report counts by (from `tools.json`); `None` where the tenant has
/// no such field or flow, whose counts are then zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalesKeys {
    /// The intent field's id (034).
    pub intent_field: Option<String>,
    /// The funnel field's id (023).
    pub funnel_field: Option<String>,
    /// The funnel's values at or past `offered`, and at or past `prepared` (list order).
    pub offered_or_later: Vec<String>,
    pub prepared_or_later: Vec<String>,
    /// The payment-link flow's id (`role: "payment_link"`).
    pub payment_flow: Option<String>,
}

/// A period's sales counts (`Store::sales_aggregates`), from `performed` entries of
/// `turns.actions` and from `nudge_sent` turns. Counts only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SalesCounts {
    /// Contacts with a performed `prospect` intent write in the period (034's definition;
    /// `prospect` is final, so a contact normally has one).
    pub prospects: i64,
    /// Contacts with a performed funnel write at or past `offered` in the period.
    pub offered: i64,
    /// Contacts with a performed funnel write at or past `prepared` in the period.
    pub prepared: i64,
    /// Contacts whose payment-link flow was performed in the period.
    pub link_contacts: i64,
    /// Payment-link flows performed in the period, and those recorded `contactAsked` (the
    /// model's claim opened the payment gate before `prepared`, 032).
    pub links_sent: i64,
    pub links_contact_asked: i64,
    /// `nudge_sent` turns in the period, and those the contact answered within 24 h.
    pub nudges_sent: i64,
    pub nudges_replied: i64,
    /// 031: `window_closing_sent` turns in the period, and those the contact answered within
    /// 24 h.
    pub window_closings_sent: i64,
    pub window_closings_replied: i64,
}

/// What a period's conversations used and cost (`Store::report_week`'s third part). A
/// conversation is one contact's turns in the period (a contact writing in two weeks has a
/// conversation in each). Sums and counts only: no conversation id leaves the store.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConversationCosts {
    /// Every conversation with a turn in the period.
    pub all: CostTotals,
    /// The sales: conversations with a performed write of the funnel field's `link_sent` stage
    /// in the period (the server writes it once the payment link was sent, 023). Zero when the
    /// tenant has no funnel field.
    pub sold: CostTotals,
    /// Conversations with a turn recorded with an escalation reason in the period: handed to a
    /// person.
    pub handed_off: CostTotals,
}

/// A group of conversations: how many, and the tokens and cost of all their turns in the period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CostTotals {
    pub conversations: i64,
    pub input_tokens: i64,
    /// Input tokens the provider served from its prompt cache (a part of `input_tokens`).
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
}

impl CostTotals {
    /// Adds one conversation's sums.
    pub(super) fn add(&mut self, conversation: &CostTotals) {
        self.conversations += conversation.conversations;
        self.input_tokens += conversation.input_tokens;
        self.cached_tokens += conversation.cached_tokens;
        self.output_tokens += conversation.output_tokens;
        self.cost_usd += conversation.cost_usd;
    }
}

/// The funnel stage that makes a conversation a sale (the last of `FUNNEL_STAGES`).
pub const SOLD_STAGE: &str = crate::config::FUNNEL_STAGES[crate::config::FUNNEL_STAGES.len() - 1];

/// One report week (`Store::report_week`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportWeek {
    pub aggregates: ReportAggregates,
    pub sales: SalesCounts,
    pub costs: ConversationCosts,
}

/// SQLite stores days as whole days since the Unix epoch.
pub(super) fn day_of_epoch_days(days: i64) -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|epoch| epoch.checked_add_signed(chrono::Duration::days(days)))
        .unwrap_or_default()
}

pub(super) fn role_of(raw: &str) -> Role {
    if raw == "user" {
        Role::User
    } else {
        Role::Agent
    }
}

/// One pass over a period's action records (`turns.actions`, read by a backend that tallies in
/// the process): the entries by tool and status (`ReportAggregates::actions`) and, by `keys`,
/// the performed sales entries per contact (`SalesCounts`'s first six counts). Both measures
/// come from the same parse of each record, so a report week reads its records once.
/// Only each entry's tool, status, id, value and `contactAsked` are read.
#[derive(Debug, Default)]
pub(super) struct ActionTally {
    keys: Option<SalesKeys>,
    /// Tool, then status (looked up by `&str`: no allocation for a pair seen before).
    by_tool_status: std::collections::BTreeMap<String, std::collections::BTreeMap<String, i64>>,
    /// Per conversation id, only for contacts with a performed entry naming a sales id.
    contacts: std::collections::HashMap<String, ContactSales>,
}

#[derive(Debug, Default)]
struct ContactSales {
    prospect: bool,
    offered: bool,
    prepared: bool,
    /// A performed write of the funnel field's `link_sent` stage ([`SOLD_STAGE`]).
    sold: bool,
    links: i64,
    links_contact_asked: i64,
}

/// An entry as the report reads it; its other keys are skipped unparsed.
#[derive(serde::Deserialize)]
struct EntryKeys<'a> {
    #[serde(borrow, default)]
    tool: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    value: Option<serde_json::Value>,
    #[serde(default, rename = "contactAsked")]
    contact_asked: Option<serde_json::Value>,
}

impl ActionTally {
    /// A tally of the entries by tool and status, and of the sales counts when `keys` names
    /// any sales id.
    pub(super) fn new(keys: Option<&SalesKeys>) -> Self {
        let keys = keys.filter(|k| {
            k.intent_field.is_some() || k.funnel_field.is_some() || k.payment_flow.is_some()
        });
        Self {
            keys: keys.cloned(),
            ..Self::default()
        }
    }

    /// Adds one turn's record. A record that is not a JSON array adds nothing; an entry that
    /// is not an object counts under an empty tool and status.
    pub(super) fn add(&mut self, conversation: &str, record: &str) {
        match serde_json::from_str::<Vec<EntryKeys<'_>>>(record) {
            Ok(entries) => {
                for entry in entries {
                    self.add_entry(conversation, entry);
                }
            }
            // Rare (a hand-edited record): read entry by entry.
            Err(_) => {
                let Ok(serde_json::Value::Array(entries)) =
                    serde_json::from_str::<serde_json::Value>(record)
                else {
                    return;
                };
                for entry in &entries {
                    let text = |key: &str| {
                        entry
                            .get(key)
                            .and_then(|v| v.as_str())
                            .map(std::borrow::Cow::Borrowed)
                    };
                    let keys = EntryKeys {
                        tool: text("tool"),
                        status: text("status"),
                        id: text("id"),
                        value: entry.get("value").cloned(),
                        contact_asked: entry.get("contactAsked").cloned(),
                    };
                    self.add_entry(conversation, keys);
                }
            }
        }
    }

    fn add_entry(&mut self, conversation: &str, entry: EntryKeys<'_>) {
        let tool = entry.tool.as_deref().unwrap_or_default();
        let status = entry.status.as_deref().unwrap_or_default();
        let statuses = match self.by_tool_status.get_mut(tool) {
            Some(statuses) => statuses,
            None => self.by_tool_status.entry(tool.to_owned()).or_default(),
        };
        match statuses.get_mut(status) {
            Some(count) => *count += 1,
            None => {
                statuses.insert(status.to_owned(), 1);
            }
        }
        let (Some(keys), Some(id)) = (&self.keys, entry.id.as_deref()) else {
            return;
        };
        if status != "performed" {
            return;
        }
        let is = |key: &Option<String>| key.as_deref() == Some(id);
        let (intent, funnel, link) = (
            is(&keys.intent_field),
            is(&keys.funnel_field),
            is(&keys.payment_flow),
        );
        if !(intent || funnel || link) {
            return;
        }
        let value = entry.value.as_ref().and_then(scalar_text);
        let value = value.as_deref();
        let set_field = tool == "set_field";
        let prospect = set_field && intent && value == Some("prospect");
        let listed = |values: &[String]| value.is_some_and(|v| values.iter().any(|x| x == v));
        let offered = set_field && funnel && listed(&keys.offered_or_later);
        let prepared = set_field && funnel && listed(&keys.prepared_or_later);
        let sold = set_field && funnel && value == Some(SOLD_STAGE);
        let sent = tool == "send_flow" && link;
        let asked = sent
            && entry
                .contact_asked
                .as_ref()
                .is_some_and(|v| v == &serde_json::Value::Bool(true) || v.as_f64() == Some(1.0));
        let contact = match self.contacts.get_mut(conversation) {
            Some(contact) => contact,
            None => self.contacts.entry(conversation.to_owned()).or_default(),
        };
        contact.prospect |= prospect;
        contact.offered |= offered;
        contact.prepared |= prepared;
        contact.sold |= sold;
        contact.links += i64::from(sent);
        contact.links_contact_asked += i64::from(asked);
    }

    /// The entries by tool and status, ordered by tool, then status.
    pub(super) fn actions(&self) -> Vec<ActionCount> {
        self.by_tool_status
            .iter()
            .flat_map(|(tool, statuses)| {
                statuses.iter().map(|(status, count)| ActionCount {
                    tool: tool.clone(),
                    status: status.clone(),
                    count: *count,
                })
            })
            .collect()
    }

    /// Whether `conversation` reached the `link_sent` stage in the tallied records.
    pub(super) fn sold(&self, conversation: &str) -> bool {
        self.contacts.get(conversation).is_some_and(|c| c.sold)
    }

    /// The sales counts (the nudge counts are left at zero: they are not action records).
    pub(super) fn sales(&self) -> SalesCounts {
        let contacts = || self.contacts.values();
        let count = |f: fn(&ContactSales) -> bool| contacts().filter(|c| f(c)).count() as i64;
        SalesCounts {
            prospects: count(|c| c.prospect),
            offered: count(|c| c.offered),
            prepared: count(|c| c.prepared),
            link_contacts: count(|c| c.links > 0),
            links_sent: contacts().map(|c| c.links).sum(),
            links_contact_asked: contacts().map(|c| c.links_contact_asked).sum(),
            ..SalesCounts::default()
        }
    }
}

/// An entry's value as SQL's `json_extract` gives it as text: a string, a number's digits, a
/// boolean as 1 or 0; nothing for null, arrays and objects.
fn scalar_text(value: &serde_json::Value) -> Option<std::borrow::Cow<'_, str>> {
    match value {
        serde_json::Value::String(s) => Some(std::borrow::Cow::Borrowed(s)),
        serde_json::Value::Number(n) => Some(std::borrow::Cow::Owned(n.to_string())),
        serde_json::Value::Bool(b) => Some(std::borrow::Cow::Borrowed(if *b { "1" } else { "0" })),
        _ => None,
    }
}

/// What `manychat-agent report` reads: one period's aggregates.
#[async_trait]
pub trait ReportStore: Send + Sync + 'static {
    /// The sales counts `manychat-agent report` reads for turns created in
    /// `[from, until)`, by the tenant's `keys` (see [`SalesCounts`]). Counted in the database;
    /// only the entries' tool, id, value, status and `contactAsked` keys are read.
    async fn sales_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &SalesKeys,
    ) -> Result<SalesCounts>;

    /// The aggregates `manychat-agent report` reads for turns created in
    /// `[from, until)`. Grouped in the database (fast over a busy week); aggregates only.
    async fn report_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<ReportAggregates>;

    /// What the conversations of turns created in `[from, until)` used and cost, in all, for
    /// the sales and for the handoffs (see [`ConversationCosts`]; `keys.funnel_field` names the
    /// funnel). Grouped per conversation in the store; sums only leave it.
    async fn conversation_costs(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &SalesKeys,
    ) -> Result<ConversationCosts>;

    /// One report week: `report_aggregates`, `sales_aggregates` and `conversation_costs`
    /// together. The same results; a backend that tallies action records in the process
    /// (SQLite) reads the week's records once for all three.
    async fn report_week(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &SalesKeys,
    ) -> Result<ReportWeek> {
        Ok(ReportWeek {
            aggregates: self.report_aggregates(from, until).await?,
            sales: self.sales_aggregates(from, until, keys).await?,
            costs: self.conversation_costs(from, until, keys).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo_keys() -> SalesKeys {
        SalesKeys {
            intent_field: Some("intent".into()),
            funnel_field: Some("funnel_stage".into()),
            offered_or_later: vec!["offered".into(), "prepared".into()],
            prepared_or_later: vec!["prepared".into()],
            payment_flow: Some("booking_link".into()),
        }
    }

    #[test]
    fn the_tally_counts_odd_records_like_the_sql_it_replaced_and_skips_unreadable_ones() {
        let mut tally = ActionTally::new(Some(&demo_keys()));
        // An escaped string (not borrowed), a non-object entry, an entry without keys.
        tally.add(
            "c1",
            r#"[{"tool":"set_\u0066ield","id":"intent","value":"prospect","status":"performed"},"odd",{}]"#,
        );
        // Not an array, and not JSON: nothing counted.
        tally.add("c1", r#"{"tool":"add_tag"}"#);
        tally.add("c1", "not json");
        // A link recorded `contactAsked`, one that failed, and a funnel value past `offered`.
        tally.add(
            "c2",
            r#"[{"tool":"send_flow","id":"booking_link","status":"performed","contactAsked":true},{"tool":"send_flow","id":"booking_link","status":"failed"},{"tool":"set_field","id":"funnel_stage","value":"prepared","status":"performed","error":null}]"#,
        );
        let pairs: Vec<(String, String, i64)> = tally
            .actions()
            .into_iter()
            .map(|a| (a.tool, a.status, a.count))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (String::new(), String::new(), 2),
                ("send_flow".into(), "failed".into(), 1),
                ("send_flow".into(), "performed".into(), 1),
                ("set_field".into(), "performed".into(), 2),
            ]
        );
        assert_eq!(
            tally.sales(),
            SalesCounts {
                prospects: 1,
                offered: 1,
                prepared: 1,
                link_contacts: 1,
                links_sent: 1,
                links_contact_asked: 1,
                ..SalesCounts::default()
            }
        );
        // A performed `link_sent` write makes a sale; a failed one, or another stage, does not.
        tally.add(
            "c3",
            r#"[{"tool":"set_field","id":"funnel_stage","value":"link_sent","status":"performed"}]"#,
        );
        tally.add(
            "c4",
            r#"[{"tool":"set_field","id":"funnel_stage","value":"link_sent","status":"failed"}]"#,
        );
        assert!(tally.sold("c3"));
        assert!(!tally.sold("c2") && !tally.sold("c4") && !tally.sold("c9"));
        // Without sales ids only the actions are tallied.
        let mut bare = ActionTally::new(Some(&SalesKeys::default()));
        bare.add(
            "c1",
            r#"[{"tool":"set_field","id":"intent","value":"prospect","status":"performed"}]"#,
        );
        assert_eq!(bare.sales(), SalesCounts::default());
        assert_eq!(bare.actions().len(), 1);
    }
}
