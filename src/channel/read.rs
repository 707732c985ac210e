//! Reading a Dynamic Block v2 body back as ManyChat does: the texts the contact is shown and
//! the fields the block sets (the owner's console plays ManyChat for its test contacts).

use serde_json::Value;

/// What ManyChat does with one of our blocks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadBlock {
    /// The texts shown to the contact, in order (none: a silent response).
    pub messages: Vec<String>,
    /// `set_field_value` actions: (field name, value). The value may be a contact token:
    /// never print it.
    pub set_fields: Vec<(String, String)>,
}

/// The block in `body`; `None` when it is not a Dynamic Block v2 (an error body, a 429).
pub fn read_block(body: &[u8]) -> Option<ReadBlock> {
    let value: Value = serde_json::from_slice(body).ok()?;
    if value.get("version").and_then(Value::as_str) != Some("v2") {
        return None;
    }
    let content = value.get("content")?;
    let texts = |key: &str| -> Vec<&Value> {
        content
            .get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    let messages = texts("messages")
        .into_iter()
        .filter_map(|m| m.get("text").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let set_fields = texts("actions")
        .into_iter()
        .filter(|a| a.get("action").and_then(Value::as_str) == Some("set_field_value"))
        .filter_map(|a| {
            let name = a.get("field_name").and_then(Value::as_str)?;
            let value = a.get("value").and_then(Value::as_str)?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();
    Some(ReadBlock {
        messages,
        set_fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Callback, Channel, SetField, render_setting};

    #[test]
    fn console_a_rendered_block_reads_back_as_its_texts_and_its_field() {
        let callback = Callback {
            url: "https://agent.example/v1/channels/manychat/message",
            authorization: "Bearer s",
            token_field: "ai_token",
        };
        let messages = vec!["One".to_owned(), "Two".to_owned()];
        let set = SetField {
            field_name: "ai_token",
            value: "t0k",
        };
        let block = render_setting(Channel::Instagram, &messages, &callback, Some(set));
        let bytes = serde_json::to_vec(&block).unwrap();
        assert_eq!(
            read_block(&bytes),
            Some(ReadBlock {
                messages,
                set_fields: vec![("ai_token".into(), "t0k".into())],
            })
        );
        assert_eq!(read_block(br#"{"error":"rate_limited"}"#), None);
    }
}
