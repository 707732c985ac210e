//! The tenant's config: `prompt.md`, `catalog.json`, `rules.json`, `tools.json` (SYSTEM 5.1),
//! `plugins.json` and the `knowledge/` documents.
//!
//! - [`tenant`]: the files as typed values (strict: unknown keys are errors).
//! - [`load`]: reading the folder, `.example` fallback for the demo, size limits, strict
//!   parsing, and the `knowledge/` documents split into passages ([`knowledge`] holds the type).
//! - [`import`]: `catalog import`, a shop's product CSV turned into offerings, priced by
//!   [`currency`], ids made by [`slug`].
//! - [`validate`]: every rule beyond types, per file (`catalog`, `rules`, `tools`, the last with
//!   its checks against the catalog and the server's names), all reported at once. A part that
//!   fails its types is reported and set aside by [`load`], so the rest and the cross-file
//!   checks still run.
//! - [`upgrade`]: `config upgrade`, the renames of older keys.
//! - [`error`]: issues naming file, JSON path and rule, never a value.
//! - [`handle`]: the config in force and its atomic reload (5.3).
//! - [`rules_match`]: the opening trigger and escalation keywords, matched before the model.
//! - [`examples`]: the shipped examples on their own, for the tests.
//! - [`schema`]: JSON Schemas generated from the types, committed under `config/schema/`.
//!
//! Invariant: nothing outside this module sees a config that has not passed validation whole.

pub mod context;
pub mod currency;
pub mod error;
pub mod examples;
pub mod handle;
pub mod hours;
pub mod import;
pub mod knowledge;
pub mod language;
pub mod load;
pub mod plugins;
pub mod rules_match;
pub mod schema;
pub mod slug;
pub mod tenant;
pub mod upgrade;
pub mod validate;

pub use context::ConfigContext;
pub use error::{ConfigErrors, ConfigIssue, printable};
pub use handle::{ConfigHandle, ReloadOutcome};
pub use language::Language;
pub use load::{MAX_CATALOG_BYTES, MAX_FILE_BYTES, load_dir, load_dir_with_catalog};
pub use schema::schemas;
pub use tenant::*;
pub use validate::{MAX_DESCRIPTION_CHARS, MAX_ID_CHARS, MAX_NAME_CHARS, is_valid_id};
