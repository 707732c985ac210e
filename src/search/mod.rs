//! A generic full-text index, in memory: text folded, tokenized and stemmed ([`analyze`]),
//! ranked BM25 ([`Index`]), with a one-edit fallback for names a contact misspells. It knows
//! nothing of the crate: documents are weighted fields of text, results are document numbers.
//! [`vectors`]: the optional semantic side, cosine similarity over normalised vectors (brute
//! force) and reciprocal rank fusion of two rankings.
//!
//! Why not SQLite FTS5 (the `rusqlite` we already have): FTS5 ships no Spanish or Portuguese
//! stemmer, and an FTS5 table is a connection a config snapshot would have to share behind a
//! mutex. An immutable index built once per config snapshot needs no lock, and the snapshot's
//! atomic swap replaces it with the config (a reload that fails keeps the old pair).
//!
//! Invariants:
//! - A document and a query go through the same [`Analyzer`], so what was indexed is what a
//!   query finds: folding drops accents and case ("Cancion" finds "canción"), stemming joins a
//!   word's forms ("guitars" finds "guitar").
//! - The index is built once and never changes; a search allocates only its own scores.

mod analyze;
mod index;
pub mod vectors;

pub use analyze::{Analyzer, Language, fold, tokens};
pub use index::{Field, Hit, Index, IndexBuilder};
