//! What loading a tenant's config needs from the environment; the loader and the validators
//! both read it.

/// What the loader needs from the environment (SYSTEM 5.2) to run the cross-checks of 012 and
/// 019: the names the server itself writes, which the tenant's tools must never touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigContext {
    /// `MANYCHAT_REPLY_FLOW_NS`: the flow that renders a deferred reply. `None` when unset.
    pub reply_flow_ns: Option<String>,
    /// `MANYCHAT_REPLY_FIELD` (default `ai_message`): the field a deferred reply is written to.
    pub reply_field: String,
    /// `MANYCHAT_TOKEN_FIELD` (default `ai_token`): the field the contact's token lives in.
    pub token_field: String,
    /// `MANYCHAT_DELIVERED_FIELD` and `MANYCHAT_DELIVERY_ID_FIELD` when the delivery handshake is
    /// on, empty otherwise: the reply flow and the outbox write them, the tenant's tools never.
    pub handshake_fields: Vec<String>,
    /// Whether `<name>.example` may stand in for an absent `<name>` (the demo only).
    pub allow_examples: bool,
}

impl Default for ConfigContext {
    fn default() -> Self {
        Self {
            reply_flow_ns: None,
            reply_field: "ai_message".to_owned(),
            token_field: "ai_token".to_owned(),
            handshake_fields: Vec::new(),
            allow_examples: false,
        }
    }
}
