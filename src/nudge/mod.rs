//! In-window nudges (025): one follow-up the model schedules, re-checked by the server when it
//! falls due.
//!
//! - Scheduling: `schedule_nudge(delay)` is a staged write (`crate::tools`), gated by intent
//!   (034) like any sales write; performing it (`crate::actions::perform_nudges`) upserts the
//!   conversation's one pending nudge row (settled rows stay as the record), with no ManyChat
//!   request.
//! - An inbound message cancels the pending (or running) nudge: `crate::turn::contact_replied`,
//!   called at the start of every turn of a tenant that has a `nudge` section.
//! - The due-time rules ([`rules`]) decide, cheapest first, whether a claimed nudge is still
//!   allowed; they are pure.
//! - The worker ([`worker`]) claims due nudges and checks them; the nudge turn ([`turn`]) runs
//!   the agent on the history and the follow-up note and writes its reply to the outbox, in one
//!   write with the nudge's settlement.
//!
//! - The window-closing flow (031, [`closing`]): sent by the worker's pass with no model call
//!   as a contact's window is about to close, once per contact ever; it cancels the pending
//!   nudge.
//!
//! Invariants: a nudge row holds ids and times only, never contact data; every state change is
//! one log line with the conversation's UUID and the reason, and one count in `/metrics`.

pub mod closing;
pub mod rules;
pub mod turn;
pub mod worker;

pub use rules::CancelReason;
pub use turn::{AgentNudgeTurn, NudgeTurnSettings};
pub use worker::{NudgeSettings, NudgeTurn, NudgeVerdict, NudgeWorker};
