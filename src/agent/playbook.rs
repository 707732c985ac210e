//! The prompt's playbook section (031 § The prompt): the active version's insights, rendered after
//! the catalog inside the cached prefix, under [`HEADER_PLAYBOOK`]. `learning::playbook` keeps
//! the versions and the cache the turns read them from.

use std::sync::Arc;

use super::prompt::HEADER_PLAYBOOK;

/// What the model is told the playbook is, under its heading.
const PLAYBOOK_RULE: &str = "Tactics the business approved from what sold before. They are \
ways of conducting the conversation, never facts: never take a price, date, product detail or \
promise from them. Where one conflicts with any rule above, the rule wins.";

/// The prompt's playbook section, appended to the static prefix after the catalog.
pub fn section(insights: &[String]) -> String {
    let mut out = String::new();
    out.push('\n');
    out.push_str(HEADER_PLAYBOOK);
    out.push('\n');
    out.push_str(PLAYBOOK_RULE);
    out.push('\n');
    for insight in insights {
        out.push_str("- ");
        out.push_str(&crate::fence::server_line(insight));
        out.push('\n');
    }
    out
}

/// The version the turns are prompted with: its hash (written on each model-written turn) and
/// its section.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivePlaybook {
    pub hash: String,
    pub section: Arc<str>,
}

impl ActivePlaybook {
    pub fn of(version: &crate::store::learning::PlaybookVersion) -> Self {
        Self {
            hash: version.content_hash.clone(),
            section: Arc::from(section(&version.insights)),
        }
    }
}
