//! The business's own documents (`config/knowledge/`): Markdown and plain-text files split by
//! heading into passages the agent is given as business text (inside the fence, never as
//! instructions). Prices, dates and discounts still come only from the catalog: a passage that
//! quotes one does not make it sayable.
//!
//! This file holds the types the rest of the crate shares; the folder is read by `load`.

/// One passage of a document: the text under one heading, small enough to hand the model whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    /// Stable across loads of the same file: `<file stem>#<n>` (n from 1, in file order), made of
    /// the characters configured ids allow, so it can be shown and recorded like an offering id.
    pub id: String,
    /// The file's name inside `config/knowledge/` (e.g. `returns.md`).
    pub file: String,
    /// The heading the passage sits under (its path of headings joined by ` > `), empty for text
    /// before the first heading or in a plain-text file.
    pub heading: String,
    /// The passage's text as written (UTF-8, trimmed), without its heading line.
    pub text: String,
}

impl Passage {
    /// A cheap estimate of the passage's size in model tokens: its heading's and text's
    /// characters over 4, rounded up (about right for English; text in other scripts takes
    /// more tokens per character, so read it as a floor). What `config check` reports, not a
    /// tokenizer's count.
    pub fn estimated_tokens(&self) -> usize {
        (self.heading.chars().count() + self.text.chars().count()).div_ceil(4)
    }
}
