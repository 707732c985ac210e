//! The tenant's files as typed values (SYSTEM 5.1). Parsing is strict: an unknown key is an
//! error, so a typo in a tenant's file is caught at load instead of silently ignored.
//! Validation beyond types (ids, cross-checks, collisions) lives in `validate`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
}

// ---------------------------------------------------------------------------------------------
// catalog.json

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Catalog {
    pub business_name: String,
    /// ISO 4217 code, e.g. `USD`.
    pub currency: String,
    pub offerings: Vec<Offering>,
    #[serde(default)]
    pub faq: Vec<Faq>,
    #[serde(default)]
    pub payment_options: Vec<PaymentOption>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Offering {
    pub id: String,
    pub name: String,
    pub description: String,
    pub price: Price,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_hours: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Minor units (cents): 45000 is 450.00.
    pub amount: i64,
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
    pub id: String,
    pub description: String,
}

// ---------------------------------------------------------------------------------------------
// rules.json

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rules {
    pub messages: Messages,
    #[serde(default = "defaults::confidence_threshold")]
    pub confidence_threshold: f64,
    #[serde(default = "defaults::max_turns")]
    pub max_turns_per_conversation: u32,
    #[serde(default = "defaults::idle_reset_hours")]
    pub idle_reset_hours: u32,
    #[serde(default = "defaults::history_days")]
    pub history_days: u32,
    #[serde(default)]
    pub escalation_keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_trigger: Option<OpeningTrigger>,
    #[serde(default)]
    pub budget: Budget,
    #[serde(default)]
    pub rate_limit: RateLimit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning: Option<Learning>,
    /// Beyond the reference: what the server does in ManyChat when a turn escalates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Messages {
    /// Sent when the race is lost: the tenant's holding line.
    pub acknowledgement: String,
    /// Sent on every escalation and on any failure (C6).
    pub escalation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_fallback: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpeningTrigger {
    pub keywords: Vec<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    #[serde(default = "defaults::daily_token_cap")]
    pub daily_token_cap: u64,
    #[serde(default = "defaults::daily_cost_cap_usd")]
    pub daily_cost_cap_usd: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            daily_token_cap: defaults::daily_token_cap(),
            daily_cost_cap_usd: defaults::daily_cost_cap_usd(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    #[serde(default = "defaults::turns_per_hour")]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converted_tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_cost_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Handoff {
    /// A ManyChat tag name added to the contact on escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A ManyChat flow sent on escalation (e.g. one that alerts a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_ns: Option<String>,
}

pub mod defaults {
    pub fn confidence_threshold() -> f64 {
        0.6
    }
    pub fn max_turns() -> u32 {
        25
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
    #[serde(default)]
    pub flows: Vec<FlowConfig>,
    #[serde(default)]
    pub tags: Vec<TagConfig>,
    #[serde(default)]
    pub fields: Vec<FieldConfig>,
    #[serde(default)]
    pub readable: Readable,
    #[serde(default)]
    pub notes: Vec<NoteConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nudge: Option<NudgeConfig>,
    #[serde(default)]
    pub events: Vec<EventConfig>,
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
    pub id: String,
    /// The flow's namespace in the tenant's ManyChat account. Never shown to the model.
    pub flow_ns: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<FlowRole>,
    #[serde(default)]
    pub repeatable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_stage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offering: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagConfig {
    pub id: String,
    /// The tag's name in ManyChat. Never shown to the model.
    pub tag: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    pub id: String,
    /// The custom field's name in ManyChat. Never shown to the model.
    pub field: String,
    pub values: Vec<String>,
    pub description: String,
    #[serde(default)]
    pub funnel: bool,
    #[serde(default)]
    pub intent: bool,
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
    pub id: String,
    pub field: String,
    pub max_length: u32,
    /// Must be the literal `true` (024): the tenant's statement that no flow renders the field.
    pub never_rendered: bool,
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
    pub id: String,
    pub minutes: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventConfig {
    pub id: String,
    pub stage: String,
    pub flow_ns: String,
}
