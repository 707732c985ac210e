//! manychat-agent: an LLM sales agent behind a business's WhatsApp number, through ManyChat.
//!
//! # Layout, in the order a turn flows through it
//!
//! A module imports only modules on lower floors (docs/ARCHITECTURE.md, "Layers").
//!
//! - [`settings`]: environment variables → typed, validated `Settings` (SYSTEM 5.2).
//! - [`config`]: the tenant's files (prompt, catalog, rules, tools), validated whole, reloaded
//!   on SIGHUP (SYSTEM 5.1, 5.3).
//! - [`http`]: the route, authentication, the per-address limit, the strict inbound body,
//!   health and readiness (SYSTEM 3.1–3.2).
//! - [`turn`]: one turn from parsed message to outcome: gates, the race, the delivery choice
//!   (SYSTEM 3.4, 4), the reply held until the flows the turn sent have played (030).
//! - [`burst`]: a message sent in pieces waits for the rest and gets one answer.
//! - [`agent`]: the prompt, the four-step loop, AgentReply and the guardrails.
//! - [`actions`]: performing staged actions and the per-turn action record (012).
//! - [`escalation`]: why a contact was handed to a person: recorded, logged, counted.
//! - [`tools`]: tools built from `tools.json`, staging and the per-turn caps (012, 024).
//! - [`plugins`]: the business's own tools from `plugins.json`: signed HTTPS reads during the
//!   step and staged writes after the reply.
//! - [`model`]: the `Model` trait, the registry, the providers and the mocks (C2).
//! - [`channel`]: the Dynamic Block v2 response and the channel capability limits (SYSTEM 3.3).
//! - [`outbox`]: deferred delivery: enqueue, the worker, pacing, retries (SYSTEM 3.5).
//! - [`tokens`]: contact tokens (019): issue, bind a request to its history, write to ManyChat
//!   inline or through the outbox, backfill.
//! - [`manychat`]: the only module that knows ManyChat's API: client, limiter, errors, sandbox.
//! - [`metrics`]: process counters for `GET /metrics`.
//! - [`store`]: the `Store` trait and its SQLite and Postgres backends (SYSTEM 8).
//! - [`retention`]: message text cleared after `RETENTION_DAYS`, hourly.
//! - [`observability`]: tracing setup and the one redaction list (C5).
//! - [`evals`]: golden eval cases, their checks and the `eval` report (SYSTEM 9).
//! - [`startup`]: assembles the app from `Settings`; takes the listener and a shutdown token.
//! - [`cli`]: the commands of SYSTEM 5.4, called by the thin `main`.
//! - [`ids`], [`clock`]: identifiers that never print personal data; the injectable clock.
//! - [`search`]: a generic full-text index in memory (folded, stemmed, BM25).
//! - [`knowledge`]: the catalog and documents above a threshold, retrieved per turn.
//! - [`fence`]: the per-turn markers around untrusted text in the prompt, and their checks.
//! - [`words`]: every word for the business owner, in `rules.json`'s `ownerLanguage`.

/// This build's version (`Cargo.toml`, `CHANGELOG.md`): in `--version`, the `serving` log line,
/// `/ready` and the report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod actions;
pub mod agent;
pub mod burst;
pub mod channel;
pub mod cli;
pub mod clock;
pub mod config;
pub mod console;
pub mod escalation;
pub mod evals;
pub mod fence;
pub mod handoff;
pub mod http;
pub mod ids;
pub mod knowledge;
pub mod learning;

pub mod manychat;
pub mod media;
pub mod metrics;
pub mod model;
pub mod nudge;
pub mod observability;
pub mod outbox;
pub mod plugins;
pub mod report;
pub mod retention;
pub mod sales;
pub mod search;
pub mod settings;
pub mod startup;
pub mod store;
pub mod tokens;
pub mod tools;
pub mod turn;
pub mod words;
