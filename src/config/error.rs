//! What is wrong with a tenant's config, as data: one [`ConfigIssue`] per broken rule, each naming
//! the file, a JSON path into it and the rule in a short English sentence.
//!
//! Invariant (C5, C9): an issue names files, keys, ids and rules, never a value from the file.
//! Tenant files hold customer copy (prices, persona, replies), and these messages reach logs and
//! terminals; parse errors from serde are scrubbed of quoted values before they land here.

use std::fmt;

/// One broken rule in one file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConfigIssue {
    /// The file as it was read, e.g. `tools.json` or `tools.json.example`.
    pub file: String,
    /// A JSON path into the file, e.g. `$.flows[2].flowNs`; `$` for the whole file; in a
    /// document of `knowledge/`, `line N`.
    pub path: String,
    /// A short English sentence naming the rule that was broken.
    pub rule: String,
}

impl ConfigIssue {
    pub fn new(file: impl Into<String>, path: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            path: path.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            printable(&self.file),
            printable(&self.path),
            printable(&self.rule)
        )
    }
}

/// `text` safe to print on a terminal: every control character and every bidirectional
/// formatting character (which can make a line read as something else) escaped as `\u{…}`. A
/// path or key from a file, or a folder's name, may hold them.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Every issue found in one load, all at once, so a tenant fixes their files in one pass.
/// Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigIssue>);

impl ConfigErrors {
    pub fn issues(&self) -> &[ConfigIssue] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issue_never_prints_a_control_or_bidi_character_raw() {
        let issue = ConfigIssue::new(
            "tools\u{202E}nosj.json",
            "$.flows[0].id\u{1b}[2J\n",
            "unknown key",
        );
        let shown = issue.to_string();
        assert!(
            !shown.chars().any(|c| c.is_control() || c == '\u{202E}'),
            "{shown:?}"
        );
        assert!(
            shown.contains("\\u{202e}") && shown.contains("\\u{1b}"),
            "{shown}"
        );
    }

    #[test]
    fn system_5_1_errors_display_one_line_per_issue_with_file_path_and_rule() {
        let errors = ConfigErrors(vec![
            ConfigIssue::new("tools.json", "$.flows[2].flowNs", "must not be empty"),
            ConfigIssue::new("rules.json", "$", "required file is missing"),
        ]);
        assert_eq!(
            errors.to_string(),
            "tools.json: $.flows[2].flowNs: must not be empty\nrules.json: $: required file is missing"
        );
    }
}
