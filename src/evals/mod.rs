//! The golden eval machinery (SYSTEM 9): the JSONL case format, loading a suite, checking one
//! observed turn against its expectations, and the report `manychat-agent eval` prints.
//!
//! - `format`: the case format and `load_suite`.
//! - `checks`: `check` and what it judges (actions, invented prices, prompt leaks).
//! - `report`: `run_suite` / `run_suite_concurrently` (at most N cases at a time, each
//!   reported as it finishes, the report in suite order) and the printed report.
//! - [`runner`]: a suite through the same agent and tools a turn uses (tools staged, never
//!   performed), on the model it names first, never the mock unasked.
//!
//! Model- and IO-agnostic: `run_suite` takes a closure that runs one case however the caller
//! likes (the real agent with any model, the demo model, a scripted one) and returns an
//! `Observation`; this module only judges. `load_suite` is the one function that reads files.
//!
//! Invariants:
//! - Parsing is strict: an unknown key, a bad type, an unknown escalation reason, a reason on a
//!   case that does not escalate, or a duplicate id is an error naming `file:line`.
//! - `check` never returns an empty failure list for a case whose observable output breaks an
//!   expectation; every failure is one short English sentence naming the expectation.
//! - Failure text quotes amounts, expected strings and the first characters of a leaked probe,
//!   never a whole reply: a real model's reply is not echoed into CI logs.
//! - Price checking follows the prompt format: a catalog price is `amount / 10^d` with `d = 0`
//!   for JPY, KRW, CLP, VND and ISK, else 2.

pub mod runner;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::config::tenant::Catalog;

mod checks;
mod format;
mod report;
pub use checks::*;
pub use format::*;
pub use report::*;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod golden;
