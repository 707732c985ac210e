//! The languages the server's own words come in (`rules.json` `ownerLanguage`): the report, the
//! console and `simulate`'s explanations for the business owner (`crate::words` holds the
//! words), and the offline model's scaffolding sentences for contacts (`model::demo`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// English, Spanish or Portuguese, written as its ISO 639-1 code (`en`, `es`, `pt`). An unknown
/// code is refused at load with the allowed ones.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    #[default]
    En,
    Es,
    Pt,
}

impl Language {
    /// Every language, English first.
    pub const ALL: [Language; 3] = [Language::En, Language::Es, Language::Pt];

    /// The ISO 639-1 code, as written in `rules.json` and in an HTML page's `lang`.
    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Es => "es",
            Language::Pt => "pt",
        }
    }

    /// The language's own name for itself.
    pub fn name(self) -> &'static str {
        match self {
            Language::En => "English",
            Language::Es => "español",
            Language::Pt => "português",
        }
    }

    /// `true` for English, the default (a rules.json without the key is written back without it).
    pub fn is_default(&self) -> bool {
        *self == Language::En
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}
