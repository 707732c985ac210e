//! The tenant's config: `prompt.md`, `catalog.json`, `rules.json`, `tools.json` (SYSTEM 5.1).
//! (loading, validation and reload in progress)

pub mod tenant;

pub use tenant::*;
