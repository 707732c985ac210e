//! Rendering a reply as ManyChat's Dynamic Block v2 body (SYSTEM 3.3).
//!
//! Invariants:
//! - Every body registers `external_message_callback`, silent ones included, so ManyChat sends
//!   the contact's next message straight back to us.
//! - On WhatsApp, which shows only the first message of a block, the messages travel as ONE text
//!   joined by a blank line: text is never dropped. Elsewhere at most 10 messages are sent and any
//!   overflow is folded into the tenth, again so nothing is lost.
//! - No `quick_replies` key is ever written (quick replies are not produced by the agent, and the
//!   key must be absent, not empty, where the channel forbids it).
//! - `actions` is empty but for one case: a contact's new token (019) rides on the block as one
//!   `set_field_value` action ([`SetField`]), so ManyChat sets the token field as it shows the
//!   reply, without an API request. Every other action is performed by the server through the
//!   API. One action at most, within every channel's 5.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;

use super::{Channel, MESSAGE_ROUTE};

/// ManyChat keeps a registered callback for at most this many seconds; we ask for the maximum.
const CALLBACK_TIMEOUT_SECONDS: u64 = 86_400;

/// Separator between messages merged into one WhatsApp text.
const MERGED_SEPARATOR: &str = "\n\n";

/// Where ManyChat should send the contact's next message: borrowed for one response from the
/// handler's settings and the caller's header.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Callback<'a> {
    /// `PUBLIC_BASE_URL` + the message route ([`callback_url`]).
    pub url: &'a str,
    /// The full `Authorization` header value the caller presented (`Bearer …`), echoed so a
    /// rotated secret keeps working for the callback it registered.
    pub authorization: &'a str,
    /// `MANYCHAT_TOKEN_FIELD`: the custom field whose ManyChat variable carries the contact token.
    pub token_field: &'a str,
}

/// The message route under `public_base_url` (a trailing slash on the base is tolerated): where
/// every callback points.
pub fn callback_url(public_base_url: &str) -> String {
    format!("{}{}", public_base_url.trim_end_matches('/'), MESSAGE_ROUTE)
}

/// The authorization value carries a shared secret: it is never printed.
impl fmt::Debug for Callback<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("url", &self.url)
            .field("authorization", &"[redacted]")
            .field("token_field", &self.token_field)
            .finish()
    }
}

/// A contact custom field the block itself sets (`set_field_value`): the contact's new token.
/// The value is a secret: never printed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SetField<'a> {
    pub field_name: &'a str,
    pub value: &'a str,
}

impl fmt::Debug for SetField<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetField")
            .field("field_name", &self.field_name)
            .field("value", &"[redacted]")
            .finish()
    }
}

/// [`render`], the block also setting `set` (one `set_field_value` action) when given.
pub fn render_setting<'a>(
    channel: Channel,
    messages: &'a [String],
    callback: &'a Callback<'_>,
    set: Option<SetField<'a>>,
) -> DynamicBlock<'a> {
    let mut block = render(channel, messages, callback);
    block.content.actions = set
        .into_iter()
        .map(|field| FieldAction {
            action: "set_field_value",
            field_name: field.field_name,
            value: field.value,
        })
        .collect();
    block
}

/// Renders `messages` as a Dynamic Block v2 body for `channel`, with the callback registered.
///
/// An empty `messages` slice (or one holding only blank strings) renders a silent response: an
/// empty `messages` array, callback still present. Deciding when silence is allowed is the
/// caller's business (SYSTEM 3.3).
///
/// The body is a typed value that borrows the callback and serialises straight to bytes: every
/// response carries it, and building a `serde_json::Value` tree first cost dozens of allocations
/// per response.
pub fn render<'a>(
    channel: Channel,
    messages: &'a [String],
    callback: &'a Callback<'_>,
) -> DynamicBlock<'a> {
    DynamicBlock {
        version: "v2",
        content: Content {
            kind: channel.content_type(),
            messages: shape_messages(channel, messages)
                .into_iter()
                .map(|text| TextMessage { kind: "text", text })
                .collect(),
            actions: Vec::new(),
            external_message_callback: CallbackBody {
                url: callback.url,
                method: "post",
                headers: CallbackHeaders {
                    authorization: callback.authorization,
                },
                payload: CallbackPayload {
                    text: "{{last_input_text}}",
                    subscriber_id: "{{contact.id}}",
                    user_id: "{{user_id}}",
                    ai_token: TokenVariable(callback.token_field),
                    offering: "{{offering}}",
                },
                timeout: CALLBACK_TIMEOUT_SECONDS,
            },
        },
    }
}

/// A Dynamic Block v2 response body (SYSTEM 3.3), ready to serialise.
#[derive(Debug, Serialize)]
pub struct DynamicBlock<'a> {
    version: &'static str,
    content: Content<'a>,
}

#[derive(Debug, Serialize)]
struct Content<'a> {
    /// Absent, not null, where the channel takes no type (Messenger).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    messages: Vec<TextMessage<'a>>,
    /// Empty, or the one field the block sets ([`render_setting`]).
    actions: Vec<FieldAction<'a>>,
    external_message_callback: CallbackBody<'a>,
}

/// `{"action":"set_field_value","field_name":…,"value":…}`.
#[derive(Serialize)]
struct FieldAction<'a> {
    action: &'static str,
    field_name: &'a str,
    value: &'a str,
}

/// The value is a secret (a contact token): never printed.
impl fmt::Debug for FieldAction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FieldAction")
            .field("action", &self.action)
            .field("field_name", &self.field_name)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Serialize)]
struct TextMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: Cow<'a, str>,
}

#[derive(Debug, Serialize)]
struct CallbackBody<'a> {
    url: &'a str,
    method: &'static str,
    headers: CallbackHeaders<'a>,
    payload: CallbackPayload<'a>,
    timeout: u64,
}

#[derive(Serialize)]
struct CallbackHeaders<'a> {
    #[serde(rename = "Authorization")]
    authorization: &'a str,
}

/// The header carries a shared secret: it is never printed.
impl fmt::Debug for CallbackHeaders<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CallbackHeaders { authorization: [redacted] }")
    }
}

#[derive(Debug, Serialize)]
struct CallbackPayload<'a> {
    text: &'static str,
    /// The contact id twice: `{{contact.id}}` as the tenant's own block body has it, and
    /// `{{user_id}}`, the variable ManyChat documents for the callback. Whichever dialect
    /// ManyChat substitutes, the inbound parse takes the first valid one.
    subscriber_id: &'static str,
    user_id: &'static str,
    ai_token: TokenVariable<'a>,
    /// 028: the contact's offering field, so the next message carries it too (an unrendered
    /// `{{offering}}` reads as absent).
    offering: &'static str,
}

/// `{{field}}`: ManyChat substitutes the contact's value of the token field.
#[derive(Debug)]
struct TokenVariable<'a>(&'a str);

impl Serialize for TokenVariable<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{{{{{}}}}}", self.0))
    }
}

/// Applies the channel's message rules. Blank strings are skipped because ManyChat refuses a text
/// message without text; they carry nothing a contact could read.
fn shape_messages(channel: Channel, messages: &[String]) -> Vec<Cow<'_, str>> {
    let texts: Vec<&str> = messages
        .iter()
        .map(String::as_str)
        .filter(|m| !m.trim().is_empty())
        .collect();
    if texts.is_empty() {
        return Vec::new();
    }
    if channel.shows_only_first_message() {
        return vec![joined(&texts)];
    }
    let max = channel.capabilities().max_messages;
    if texts.len() <= max {
        return texts.into_iter().map(Cow::Borrowed).collect();
    }
    let mut shaped: Vec<Cow<'_, str>> =
        texts[..max - 1].iter().map(|t| Cow::Borrowed(*t)).collect();
    shaped.push(joined(&texts[max - 1..]));
    shaped
}

/// The messages of a reply delivered later through the outbox, shaped as the channel shows them:
/// on WhatsApp one text (one field write and one flow trigger instead of one per
/// message, as inline), elsewhere at most the channel's number of messages.
pub fn deferred_messages(channel: Channel, messages: Vec<String>) -> Vec<String> {
    shape_messages(channel, &messages)
        .into_iter()
        .map(Cow::into_owned)
        .collect()
}

/// One text of several, separated by a blank line; a single text is not copied.
fn joined<'a>(texts: &[&'a str]) -> Cow<'a, str> {
    match texts {
        [one] => Cow::Borrowed(one),
        _ => Cow::Owned(texts.join(MERGED_SEPARATOR)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// The body exactly as it goes on the wire, as JSON to assert on.
    fn render(channel: Channel, messages: &[String], callback: &Callback<'_>) -> Value {
        let bytes = serde_json::to_vec(&super::render(channel, messages, callback))
            .expect("a body serialises");
        serde_json::from_slice(&bytes).expect("the body is JSON")
    }

    fn callback() -> Callback<'static> {
        Callback {
            url: "https://agent.example.test/v1/channels/manychat/message",
            authorization: "Bearer fixture-secret-0123456789",
            token_field: "ai_token",
        }
    }

    #[test]
    fn system_3_3_callback_url_is_the_message_route_under_the_public_base() {
        for base in ["https://agent.example.test", "https://agent.example.test/"] {
            assert_eq!(callback_url(base), callback().url, "{base}");
        }
    }

    fn msgs(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn system_3_3_whatsapp_body_is_exactly_the_v2_shape() {
        let body = render(Channel::Whatsapp, &msgs(&["Hello there."]), &callback());
        let expected = json!({
            "version": "v2",
            "content": {
                "type": "whatsapp",
                "messages": [{ "type": "text", "text": "Hello there." }],
                "actions": [],
                "external_message_callback": {
                    "url": "https://agent.example.test/v1/channels/manychat/message",
                    "method": "post",
                    "headers": { "Authorization": "Bearer fixture-secret-0123456789" },
                    "payload": {
                        "text": "{{last_input_text}}",
                        "subscriber_id": "{{contact.id}}",
                        "user_id": "{{user_id}}",
                        "ai_token": "{{ai_token}}",
                        "offering": "{{offering}}"
                    },
                    "timeout": 86400
                }
            }
        });
        assert_eq!(body, expected);
    }

    #[test]
    fn system_3_3_whatsapp_joins_messages_with_a_blank_line_and_drops_none() {
        let body = render(
            Channel::Whatsapp,
            &msgs(&["First part.", "Second part.", "A question?"]),
            &callback(),
        );
        assert_eq!(
            body["content"]["messages"],
            json!([{ "type": "text", "text": "First part.\n\nSecond part.\n\nA question?" }])
        );
    }

    #[test]
    fn spec_028_the_callback_requests_the_offering_again() {
        let body = render(Channel::Whatsapp, &msgs(&["Hi."]), &callback());
        let payload = &body["content"]["external_message_callback"]["payload"];
        assert_eq!(payload["offering"], json!("{{offering}}"));
    }

    #[test]
    fn a_deferred_whatsapp_reply_is_one_message() {
        let three = msgs(&["One.", "Two.", "Three."]);
        assert_eq!(
            deferred_messages(Channel::Whatsapp, three.clone()),
            vec!["One.\n\nTwo.\n\nThree.".to_owned()]
        );
        assert_eq!(deferred_messages(Channel::Telegram, three.clone()), three);
    }

    #[test]
    fn system_3_3_other_channels_send_separate_messages_at_most_ten() {
        let many: Vec<String> = (1..=12).map(|i| format!("Message {i}.")).collect();
        for channel in [Channel::Instagram, Channel::Messenger, Channel::Telegram] {
            let body = render(channel, &many[..3], &callback());
            let sent = body["content"]["messages"].as_array().unwrap();
            assert_eq!(sent.len(), 3, "{channel}");
            assert_eq!(sent[1], json!({ "type": "text", "text": "Message 2." }));

            let body = render(channel, &many, &callback());
            let sent = body["content"]["messages"].as_array().unwrap();
            assert_eq!(sent.len(), 10, "{channel}");
            assert_eq!(
                sent[9]["text"],
                json!("Message 10.\n\nMessage 11.\n\nMessage 12.")
            );
        }
    }

    #[test]
    fn system_3_3_content_type_names_the_channel_and_is_absent_for_messenger() {
        for (channel, kind) in [
            (Channel::Whatsapp, Some("whatsapp")),
            (Channel::Instagram, Some("instagram")),
            (Channel::Telegram, Some("telegram")),
            (Channel::Messenger, None),
        ] {
            let body = render(channel, &msgs(&["Hi."]), &callback());
            let content = body["content"].as_object().unwrap();
            assert_eq!(content.get("type").and_then(Value::as_str), kind);
        }
    }

    /// 019: a new token rides on the block as one `set_field_value` action of the token field;
    /// the messages are exactly those of the block without it, on every channel, and the
    /// channel's 5 actions are never exceeded.
    #[test]
    fn system_019_a_new_token_is_set_by_the_block_with_the_text_unchanged() {
        for channel in Channel::ALL {
            let messages = msgs(&["Hi.", "More."]);
            let set = SetField {
                field_name: "ai_token",
                value: "tok_0123456789abcdef",
            };
            let with =
                serde_json::to_value(render_setting(channel, &messages, &callback(), Some(set)))
                    .unwrap();
            let without = render(channel, &messages, &callback());
            assert_eq!(
                with["content"]["actions"],
                json!([{"action": "set_field_value", "field_name": "ai_token",
                        "value": "tok_0123456789abcdef"}]),
                "{channel}"
            );
            assert!(
                with["content"]["actions"].as_array().unwrap().len()
                    <= channel.capabilities().max_actions
            );
            assert_eq!(with["content"]["messages"], without["content"]["messages"]);
            assert_eq!(
                with["content"]["external_message_callback"],
                without["content"]["external_message_callback"]
            );
            assert!(
                !format!("{set:?}").contains("tok_"),
                "the value is never printed"
            );
        }
    }

    #[test]
    fn system_3_3_no_quick_replies_key_on_any_channel() {
        for channel in Channel::ALL {
            let body = render(channel, &msgs(&["Hi.", "More."]), &callback());
            let text = body.to_string();
            assert!(!text.contains("quick_replies"), "{channel}: {text}");
        }
    }

    #[test]
    fn system_3_3_silent_response_keeps_the_callback() {
        for input in [msgs(&[]), msgs(&["", "   "])] {
            let body = render(Channel::Whatsapp, &input, &callback());
            assert_eq!(body["content"]["messages"], json!([]));
            assert_eq!(body["content"]["actions"], json!([]));
            assert_eq!(
                body["content"]["external_message_callback"]["url"],
                json!("https://agent.example.test/v1/channels/manychat/message")
            );
        }
    }

    #[test]
    fn spec_030_verification_3_a_silent_response_has_no_messages_and_still_registers_the_callback()
    {
        // 030: the response of a turn whose flow is still playing carries no message at all.
        for channel in Channel::ALL {
            let body = render(channel, &[], &callback());
            assert_eq!(body["content"]["messages"], json!([]), "{channel}");
            let registered = &body["content"]["external_message_callback"];
            assert_eq!(
                registered["url"],
                json!("https://agent.example.test/v1/channels/manychat/message"),
                "{channel}"
            );
            assert_eq!(
                registered["headers"]["Authorization"],
                json!("Bearer fixture-secret-0123456789"),
                "{channel}: {registered}"
            );
        }
    }

    #[test]
    fn system_3_3_callback_echoes_the_presented_authorization_and_token_field() {
        let cb = Callback {
            authorization: "Bearer rotated-secret-abcdefghij",
            token_field: "contact_key",
            ..callback()
        };
        let body = render(Channel::Telegram, &msgs(&["Hi."]), &cb);
        let registered = &body["content"]["external_message_callback"];
        let headers = registered["headers"].as_object().unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(
            headers.get("Authorization"),
            Some(&json!("Bearer rotated-secret-abcdefghij"))
        );
        assert_eq!(registered["payload"]["ai_token"], json!("{{contact_key}}"));
        assert_eq!(registered["timeout"], json!(86400));
    }

    #[test]
    fn system_3_3_callback_debug_hides_the_secret() {
        let printed = format!("{:?}", callback());
        assert!(!printed.contains("fixture-secret"), "{printed}");
    }
}
