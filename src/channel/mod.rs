//! The channel a deployment answers on, and what that channel can show (SYSTEM 3.3).
//!
//! Owns the `Channel` enum (picked by the `CHANNEL` variable), each channel's capability limits,
//! and, in [`render`], the Dynamic Block v2 body that ManyChat expects back ([`read`]: read back
//! as ManyChat does, for the console's test contacts).
//!
//! Invariants: WhatsApp is the default; quick replies are allowed only on Instagram and
//! Messenger; every channel takes at most 10 messages and 5 actions per block.

pub mod read;
pub mod render;

pub use render::{
    Callback, DynamicBlock, SetField, callback_url, deferred_messages, render, render_setting,
};

use std::fmt;
use std::str::FromStr;

/// The route ManyChat posts to; also the path of the `external_message_callback` URL.
pub const MESSAGE_ROUTE: &str = "/v1/channels/manychat/message";

/// The messaging channel this deployment answers on. One deployment serves one channel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    #[default]
    Whatsapp,
    Instagram,
    Messenger,
    Telegram,
}

/// What a channel can show in one Dynamic Block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Messages per block.
    pub max_messages: usize,
    /// Actions per block.
    pub max_actions: usize,
    /// Whether a `quick_replies` key may be sent at all. Where it is false the key is omitted,
    /// never sent empty.
    pub quick_replies: bool,
    /// Buttons attached to one text message.
    pub buttons_per_text: usize,
}

/// A `CHANNEL` value that names no channel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be one of whatsapp, instagram, messenger, telegram")]
pub struct UnknownChannel;

impl Channel {
    pub const ALL: [Channel; 4] = [
        Channel::Whatsapp,
        Channel::Instagram,
        Channel::Messenger,
        Channel::Telegram,
    ];

    /// The lowercase name used by `CHANNEL` and stored on conversations.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Whatsapp => "whatsapp",
            Channel::Instagram => "instagram",
            Channel::Messenger => "messenger",
            Channel::Telegram => "telegram",
        }
    }

    /// The Dynamic Block's `content.type`. ManyChat's docs have Messenger omit it.
    pub fn content_type(self) -> Option<&'static str> {
        match self {
            Channel::Messenger => None,
            other => Some(other.as_str()),
        }
    }

    /// This channel's capability limits (SYSTEM 3.3).
    pub fn capabilities(self) -> Capabilities {
        Capabilities {
            max_messages: 10,
            max_actions: 5,
            quick_replies: matches!(self, Channel::Instagram | Channel::Messenger),
            buttons_per_text: if self == Channel::Telegram { 10 } else { 3 },
        }
    }

    /// WhatsApp shows only the first message of a Dynamic Block, so a reply must travel as one.
    pub fn shows_only_first_message(self) -> bool {
        self == Channel::Whatsapp
    }
}

impl FromStr for Channel {
    type Err = UnknownChannel;

    /// Case-insensitive, surrounding whitespace ignored.
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let wanted = raw.trim();
        Channel::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(wanted))
            .ok_or(UnknownChannel)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_3_3_whatsapp_is_the_default_channel() {
        assert_eq!(Channel::default(), Channel::Whatsapp);
    }

    #[test]
    fn system_3_3_channel_names_parse_and_others_are_refused() {
        for c in Channel::ALL {
            assert_eq!(c.as_str().parse::<Channel>(), Ok(c));
        }
        assert_eq!(" Telegram ".parse::<Channel>(), Ok(Channel::Telegram));
        assert_eq!("sms".parse::<Channel>(), Err(UnknownChannel));
        assert_eq!("".parse::<Channel>(), Err(UnknownChannel));
    }

    #[test]
    fn system_3_3_channel_serialises_as_its_lowercase_name() {
        for c in Channel::ALL {
            let json = serde_json::to_value(c).unwrap();
            assert_eq!(json, serde_json::json!(c.as_str()));
            assert_eq!(serde_json::from_value::<Channel>(json).unwrap(), c);
        }
    }

    #[test]
    fn system_3_3_capability_limits_per_channel() {
        let table = [
            (Channel::Whatsapp, false, 3),
            (Channel::Instagram, true, 3),
            (Channel::Messenger, true, 3),
            (Channel::Telegram, false, 10),
        ];
        for (channel, quick_replies, buttons) in table {
            let caps = channel.capabilities();
            assert_eq!(caps.max_messages, 10, "{channel}");
            assert_eq!(caps.max_actions, 5, "{channel}");
            assert_eq!(caps.quick_replies, quick_replies, "{channel}");
            assert_eq!(caps.buttons_per_text, buttons, "{channel}");
        }
    }

    #[test]
    fn system_3_3_content_type_is_omitted_only_for_messenger() {
        assert_eq!(Channel::Whatsapp.content_type(), Some("whatsapp"));
        assert_eq!(Channel::Instagram.content_type(), Some("instagram"));
        assert_eq!(Channel::Telegram.content_type(), Some("telegram"));
        assert_eq!(Channel::Messenger.content_type(), None);
    }
}
