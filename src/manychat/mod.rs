//! The only module that knows ManyChat's API and its JSON (SYSTEM 3.5, 5.5; 012; 024).
//!
//! - [`limiter`]: the one token bucket every ManyChat request waits on (10/s, burst 5, never more
//!   than 10 in a sliding second), on tokio's clock, or the burst-free bucket every replica
//!   shares when the store keeps one; `Retry-After` holds; replies before token writes; and the
//!   per-contact sendFlow count (100 an hour).
//! - [`error`]: [`ManyChatError`], its retry classification and its log label.
//! - [`client`]: [`ManyChatClient`], the six calls (sendFlow, addTagByName, removeTagByName,
//!   setCustomFieldByName, setCustomFields, getInfo), and the three read-only page calls of the wiring check
//!   (getFlows, getTags, getCustomFields).
//! - [`contact`]: [`ContactRecord`], getInfo reduced to tag names and custom field values.
//! - [`sandbox`]: the in-process fake ManyChat the demo runs against.
//! - [`recorder`]: where a test contact's calls go instead of ManyChat (the owner's console).
//! - [`account`]: the account's flows, tags and custom fields (the page API), and the check of
//!   a deployment's names against them (`manychat check`).
//!
//! Architecture invariants: nothing outside this module builds a ManyChat URL or body or reads a
//! ManyChat response; every request passes the shared limiter, and a test contact's reaches no
//! ManyChat at all (the recorder); a subscriber's identifiers (name,
//! phone, email, …) never leave [`contact`]; no log line or error carries a body, an id or the
//! token.

pub mod account;
pub mod client;
pub mod contact;
pub mod error;
pub mod limiter;
pub mod recorder;
pub mod sandbox;

pub use client::{ManyChatClient, REQUEST_TIMEOUT};
pub use contact::ContactRecord;
pub use error::ManyChatError;
pub use limiter::ManyChatLimiter;
pub use recorder::Recorder;
pub use sandbox::{Sandbox, SandboxRequest};
