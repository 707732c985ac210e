//! The key that routes a config's requests to one provider prompt cache (OpenAI's
//! `prompt_cache_key`, carried as `CacheHints::key`).
//!
//! Invariant: the key is a hash of the config in force alone (the static prefix, which holds
//! the tenant's prompt, catalog and playbook, and the `tools.json` and `plugins.json` the tool
//! definitions come from), never of anything that names or follows a contact. Every turn of one
//! snapshot carries the same key, and a changed config gets a new one with its new prefix.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::TenantConfig;

/// Hex characters kept of the SHA-256: 64 bits, plenty to tell configs apart.
const KEY_CHARS: usize = 16;

/// The cache key of `prefix` (the snapshot's static prefix) under `config`.
pub fn cache_key(prefix: &str, config: &TenantConfig) -> Arc<str> {
    let mut hasher = Sha256::new();
    hasher.update(prefix.as_bytes());
    for part in [
        serde_json::to_vec(&config.tools),
        serde_json::to_vec(&config.plugins),
    ] {
        hasher.update([0]);
        // Serialising plain config data cannot fail; an empty part would only widen a key.
        hasher.update(part.unwrap_or_default());
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Arc::from(&hex[..KEY_CHARS])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_is_a_short_hash_of_the_config_that_changes_with_it() {
        let config = crate::config::examples::demo_tenant();
        let key = cache_key("prefix", &config);
        assert_eq!(key.len(), KEY_CHARS);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert_eq!(key, cache_key("prefix", &config), "stable for one config");
        assert_ne!(key, cache_key("another prefix", &config));
        let mut fewer_tools = config.clone();
        fewer_tools.tools = None;
        assert_ne!(key, cache_key("prefix", &fewer_tools));
    }
}
