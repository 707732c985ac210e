//! The tenant's files as typed values (SYSTEM 5.1). Parsing is strict: an unknown key is an
//! error, so a typo in a tenant's file is caught at load instead of silently ignored.
//! Validation beyond types (ids, cross-checks, collisions) lives in `validate`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What every configured id must match (SYSTEM 5.1). Also written into the JSON Schemas so an
/// editor flags a bad id as it is typed; `validate` enforces it.
pub const ID_PATTERN: &str = "^[a-z0-9_-]+$";

/// One consistent snapshot of the tenant's config. A turn holds an `Arc` of it from start to
/// end, so a reload mid-turn never mixes two configs (5.3).
#[derive(Debug, Clone, PartialEq)]
pub struct TenantConfig {
    /// `prompt.md` with `{{businessName}}` filled from the catalog.
    pub prompt: String,
    pub catalog: Catalog,
    pub rules: Rules,
    /// `None` when `tools.json` is absent: no tools are offered.
    pub tools: Option<ToolsConfig>,
    /// `None` when `plugins.json` is absent: no plugin tools (`crate::plugins`).
    pub plugins: Option<super::plugins::PluginsConfig>,
    /// The passages of `config/knowledge/`'s documents, in file then text order; empty without
    /// the folder.
    pub knowledge: Vec<super::knowledge::Passage>,
}

// ---------------------------------------------------------------------------------------------
// catalog.json

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Catalog {
    /// The business's name as contacts know it; fills `{{businessName}}` in `prompt.md`.
    #[schemars(length(min = 1))]
    pub business_name: String,
    /// ISO 4217 code, e.g. `USD`. Every offering's price is in this currency.
    #[schemars(pattern("^[A-Z]{3}$"))]
    pub currency: String,
    /// What the business sells; at least one.
    #[schemars(length(min = 1))]
    pub offerings: Vec<Offering>,
    /// Questions and answers the agent may rephrase.
    #[serde(default)]
    pub faq: Vec<Faq>,
    /// Published ways to pay; a request one of these covers is answered, not escalated.
    #[serde(default)]
    pub payment_options: Vec<PaymentOption>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Offering {
    /// Unique among offerings; the offering field's values and `flows[].offering` name it.
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    pub name: String,
    pub description: String,
    pub price: Price,
    /// Total hours of the offering; greater than zero when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_hours: Option<f64>,
    /// When it runs, in the tenant's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// An `https://` page about the offering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Minor units (cents): 45000 is 450.00. Zero or more.
    #[schemars(range(min = 0))]
    pub amount: i64,
    /// Must equal the catalog's `currency`.
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Faq {
    pub question: String,
    pub answer: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentOption {
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    pub description: String,
}

// ---------------------------------------------------------------------------------------------
// rules.json

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rules {
    /// The tenant's fixed lines (C9): required, no defaults.
    pub messages: Messages,
    /// Below this model confidence the turn escalates as `low_confidence`. 0 to 1.
    #[serde(default = "defaults::confidence_threshold")]
    #[schemars(range(min = 0, max = 1))]
    pub confidence_threshold: f64,
    /// Contact messages per conversation (since the last idle gap) before escalating.
    #[serde(default = "defaults::max_turns")]
    #[schemars(range(min = 1))]
    pub max_turns_per_conversation: u32,
    /// A gap this long restarts the turn count.
    #[serde(default = "defaults::idle_reset_hours")]
    #[schemars(range(min = 1))]
    pub idle_reset_hours: u32,
    /// How far back history is read.
    #[serde(default = "defaults::history_days")]
    #[schemars(range(min = 1))]
    pub history_days: u32,
    /// Substrings (case- and accent-insensitive) that escalate before the model runs.
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    pub escalation_keywords: Vec<String>,
    /// A scripted first reply for an exact keyword message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_trigger: Option<OpeningTrigger>,
    /// Daily caps for the whole tenant; over them every turn escalates.
    #[serde(default)]
    pub budget: Budget,
    #[serde(default)]
    pub rate_limit: RateLimit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning: Option<Learning>,
    /// Beyond the reference: what the server does in ManyChat when a turn escalates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    /// Business hours; absent: always open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<Hours>,
    /// A contact's message sent in pieces gets one answer.
    #[serde(default, skip_serializing_if = "Burst::is_off")]
    pub burst: Burst,
    /// The business owner's language (`en`, `es` or `pt`; absent: `en`): the report, the console
    /// and `simulate`'s explanations speak it. Not the contacts' language: the assistant answers
    /// contacts in the language `prompt.md` asks for.
    #[serde(default, skip_serializing_if = "super::Language::is_default")]
    pub owner_language: super::Language,
    /// Knowledge at scale: up to these sizes the catalog and the documents are written into
    /// every prompt; above them, each turn is given the offerings and passages relevant to it.
    #[serde(default, skip_serializing_if = "KnowledgeRules::is_default")]
    pub knowledge: KnowledgeRules,
}

/// Where the prompt stops listing everything and retrieval starts (`rules.json` `knowledge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KnowledgeRules {
    /// Up to this many offerings the whole catalog is in every prompt; more are retrieved per
    /// turn.
    #[serde(default = "defaults::prompt_offerings")]
    pub prompt_offerings: u32,
    /// Up to this many tokens (estimated: four characters a token) of `config/knowledge/`
    /// documents are in every prompt; more are retrieved per turn.
    #[serde(default = "defaults::prompt_document_tokens")]
    pub prompt_document_tokens: u32,
    /// The language the catalog and documents are written in, for stemming: `en`, `es` or
    /// `pt`. Absent: every word is indexed under all three languages' stems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern("^(en|es|pt)$"))]
    pub language: Option<String>,
}

impl Default for KnowledgeRules {
    fn default() -> Self {
        Self {
            prompt_offerings: defaults::prompt_offerings(),
            prompt_document_tokens: defaults::prompt_document_tokens(),
            language: None,
        }
    }
}

impl KnowledgeRules {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// How long a turn waits for more pieces of the contact's message before the model runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Burst {
    /// Quiet time, in milliseconds, that ends a burst; 0 answers every message on its own.
    #[serde(default)]
    #[schemars(range(min = 0, max = 3000))]
    pub window_ms: u32,
}

impl Burst {
    /// The longest window a tenant may set.
    pub const MAX_WINDOW_MS: u32 = 3000;

    pub fn is_off(&self) -> bool {
        self.window_ms == 0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Messages {
    /// Sent when the race is lost: the tenant's holding line.
    #[schemars(length(min = 1))]
    pub acknowledgement: String,
    /// Sent on every escalation and on any failure (C6).
    #[schemars(length(min = 1))]
    pub escalation: String,
    /// Sent when the contact sends media the agent cannot read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_fallback: Option<String>,
    /// 013: sent instead of a reply that repeats an earlier agent message; absent, the repeat
    /// is sent and only recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closer: Option<String>,
    /// Sent instead of `escalation` on a handoff outside `hours`; required with `hours`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_closed: Option<String>,
}

/// Business hours: outside them a handoff answers with `messages.escalationClosed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hours {
    /// An IANA time zone (e.g. `Europe/Madrid`); daylight-saving changes follow it.
    pub timezone: String,
    /// Per day (`mon` … `sun`), its openings as `HH:MM-HH:MM` ranges (`24:00` ends the day); a
    /// day absent or empty is closed.
    #[serde(default)]
    pub weekly: std::collections::BTreeMap<String, Vec<String>>,
    /// Dates (`YYYY-MM-DD`, local) closed all day.
    #[serde(default)]
    pub closed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpeningTrigger {
    /// Whole messages (trimmed, case-insensitive) that get the scripted `message`.
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub keywords: Vec<String>,
    /// Returned verbatim, without the model.
    #[schemars(length(min = 1))]
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Model tokens per day; greater than zero.
    #[serde(default = "defaults::daily_token_cap")]
    #[schemars(range(min = 1))]
    pub daily_token_cap: u64,
    /// Model cost per day in USD; greater than zero.
    #[serde(default = "defaults::daily_cost_cap_usd")]
    pub daily_cost_cap_usd: f64,
    /// Optional: model tokens per day for one contact, at most `dailyTokenCap`; a contact over
    /// it is handed to a person (`budget_contact`) while the others are still served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub per_contact_daily_token_cap: Option<u64>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            daily_token_cap: defaults::daily_token_cap(),
            daily_cost_cap_usd: defaults::daily_cost_cap_usd(),
            per_contact_daily_token_cap: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Turns one contact may take per hour before escalating.
    #[serde(default = "defaults::turns_per_hour")]
    #[schemars(range(min = 1))]
    pub turns_per_subscriber_per_hour: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            turns_per_subscriber_per_hour: defaults::turns_per_hour(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Learning {
    /// The language the analyst writes its proposals in (absent: English).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The ManyChat tag a paying contact carries: the only signal learning reads.
    pub converted_tag: String,
    /// The most one analyst run may cost, in USD, priced at its worst case before the call;
    /// required, no default.
    pub max_run_cost_usd: f64,
}

impl Learning {
    /// The proposals' language.
    pub fn language(&self) -> &str {
        self.language
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .unwrap_or("English")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Handoff {
    /// A ManyChat tag name added to the contact on escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A ManyChat flow sent on escalation (e.g. one that alerts a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_ns: Option<String>,
    /// How long the assistant stays out of a conversation after handing it to a person, from
    /// 0 (never) to 168; the tag's removal or an operator's release end it sooner.
    #[serde(default = "defaults::hold_hours")]
    #[schemars(range(max = 168))]
    pub hold_hours: u32,
}

impl Default for Handoff {
    /// No tag, no flow, the default hold.
    fn default() -> Self {
        Self {
            tag: None,
            flow_ns: None,
            hold_hours: defaults::hold_hours(),
        }
    }
}

pub mod defaults {
    pub fn confidence_threshold() -> f64 {
        0.6
    }
    pub fn max_turns() -> u32 {
        25
    }
    pub fn hold_hours() -> u32 {
        24
    }
    pub fn idle_reset_hours() -> u32 {
        24
    }
    pub fn history_days() -> u32 {
        30
    }
    pub fn daily_token_cap() -> u64 {
        1_000_000
    }
    pub fn daily_cost_cap_usd() -> f64 {
        5.0
    }
    pub fn turns_per_hour() -> u32 {
        60
    }
    pub fn prompt_offerings() -> u32 {
        40
    }
    pub fn prompt_document_tokens() -> u32 {
        3000
    }
}

// ---------------------------------------------------------------------------------------------
// tools.json (012, 024, 023–034)

/// The funnel field's values, exactly and in this order (023): stages only move forward, and
/// the order here is that direction.
pub const FUNNEL_STAGES: [&str; 6] = [
    "new",
    "qualifying",
    "nurturing",
    "offered",
    "prepared",
    "link_sent",
];

/// The intent field's values, exactly (034).
pub const INTENT_VALUES: [&str; 2] = ["not_prospect", "prospect"];

/// The longest note a tenant may declare (024): fits a ManyChat text field with room to spare.
pub const MAX_NOTE_LENGTH: u32 = 500;

/// The longest a reply may wait for a flow to play (030).
pub const MAX_SETTLE_SECONDS: u32 = 30;

/// The longest nudge delay (025): past it the 24-hour window would be closing.
pub const MAX_NUDGE_MINUTES: u32 = 1380;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsConfig {
    /// Tenant flows the agent may send (`send_flow`).
    #[serde(default)]
    pub flows: Vec<FlowConfig>,
    /// Tags the agent may add or remove.
    #[serde(default)]
    pub tags: Vec<TagConfig>,
    /// Enumerated custom fields the agent may set.
    #[serde(default)]
    pub fields: Vec<FieldConfig>,
    /// Tags and fields the agent may read but never write (024).
    #[serde(default)]
    pub readable: Readable,
    /// Free-text note fields no flow renders (024).
    #[serde(default)]
    pub notes: Vec<NoteConfig>,
    /// Follow-up delays the agent may schedule (025).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nudge: Option<NudgeConfig>,
    /// Conversion events sent when the funnel reaches a stage (027).
    #[serde(default)]
    pub events: Vec<EventConfig>,
    /// The flow the server sends as the contact's 24-hour window is about to close (031).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_closing: Option<WindowClosingConfig>,
}

/// 031: sent by the server, with no model call, at the contact's last message plus 1380
/// minutes, once per contact ever. Never shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WindowClosingConfig {
    /// The flow's namespace in the tenant's ManyChat account; not any `flows[].flowNs`.
    pub flow_ns: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowRole {
    PaymentLink,
    Opening,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlowConfig {
    /// What the model names; unique among flows.
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    /// The flow's namespace in the tenant's ManyChat account. Never shown to the model; must
    /// not be `MANYCHAT_REPLY_FLOW_NS` (012).
    pub flow_ns: String,
    /// What the flow contains and when to send it: the guidance the model reads.
    pub description: String,
    /// `payment_link` (at most one) or `opening` (at most one; sent by the server, 032).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<FlowRole>,
    /// May be sent more than once per contact (023).
    #[serde(default)]
    pub repeatable: bool,
    /// How long the reply waits after the flow is accepted, 0 to 30 (030).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_SETTLE_SECONDS))]
    pub settle_seconds: Option<u32>,
    /// A funnel stage; the server sends this flow when the model records it (032).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_stage: Option<String>,
    /// A catalog offering id this flow belongs to (028).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offering: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagConfig {
    /// What the model names; unique across `tags` and `readable.tags`.
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    /// The tag's name in ManyChat. Never shown to the model.
    pub tag: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    /// What the model names; unique across fields, readable fields and notes.
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    /// The custom field's name in ManyChat. Never shown to the model; must not be
    /// `MANYCHAT_REPLY_FIELD` or `MANYCHAT_TOKEN_FIELD` (012), nor, with the delivery handshake
    /// on, `MANYCHAT_DELIVERED_FIELD` or `MANYCHAT_DELIVERY_ID_FIELD`.
    pub field: String,
    /// The only values that may be written (no free text, 012); unique ids. The offering field
    /// may leave it out: its values are then the catalog's offering ids.
    #[serde(default)]
    #[schemars(inner(pattern(ID_PATTERN)))]
    pub values: Vec<String>,
    pub description: String,
    /// The funnel field (023): values exactly new, qualifying, nurturing, offered, prepared,
    /// link_sent. Requires an intent field.
    #[serde(default)]
    pub funnel: bool,
    /// The intent field (034): values exactly not_prospect, prospect.
    #[serde(default)]
    pub intent: bool,
    /// The offering field (028): values exactly the catalog's offering ids, or none listed
    /// (the catalog's ids, checked by the server against the whole catalog).
    #[serde(default)]
    pub offering: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Readable {
    #[serde(default)]
    pub tags: Vec<TagConfig>,
    #[serde(default)]
    pub fields: Vec<FieldConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteConfig {
    /// What the model names; unique across fields, readable fields and notes.
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    /// The ManyChat text field written; distinct from every other configured field, from the
    /// reply and token fields (024) and, with the delivery handshake on, from its two fields.
    pub field: String,
    /// Longest note written, 1 to 500 characters.
    #[schemars(range(min = 1, max = MAX_NOTE_LENGTH))]
    pub max_length: u32,
    /// Must be the literal `true` (024): the tenant's statement that no flow renders the field.
    #[schemars(extend("const" = true))]
    pub never_rendered: bool,
    /// Performed even when the turn escalates (the handoff summary, 024).
    #[serde(default)]
    pub on_escalation: bool,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NudgeConfig {
    pub delays: Vec<NudgeDelay>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_active_tag: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NudgeDelay {
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    /// 1 to 1380 minutes (the 24-hour window less a margin).
    #[schemars(range(min = 1, max = MAX_NUDGE_MINUTES))]
    pub minutes: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventConfig {
    #[schemars(pattern(ID_PATTERN))]
    pub id: String,
    /// The funnel stage whose performed write fires the event.
    pub stage: String,
    /// The tenant flow holding ManyChat's conversion-event action.
    pub flow_ns: String,
}
