//! The optional semantic side of retrieval (`KNOWLEDGE_EMBEDDINGS`): one vector per indexed
//! offering and passage, filled in while turns run, and the turn's message ranked by cosine
//! beside the full-text ranking, the two fused by reciprocal rank (`crate::search::vectors`).
//!
//! - [`Knowledge::embedding_texts`]: each document's text as the index holds it (an offering's
//!   name, id, description and schedule; a passage's heading and text), whose [`content_hash`]
//!   keys its stored vector.
//! - [`Knowledge::set_vector`]: a document's vector, set once (a `OnceLock` per document, so a
//!   turn reads the vectors that are there without a lock and never waits for the rest).
//!
//! Invariant: without vectors, or without the query's, retrieval is the full-text one, byte for
//! byte.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use super::Knowledge;
use crate::config::TenantConfig;
use crate::search::vectors::{self, normalised};

/// A vector hit under this cosine is left out, whatever the best: unrelated texts score lower
/// on the usual embedding models.
pub const MIN_COSINE: f32 = 0.3;
/// A vector hit more than this under the best one is left out.
pub const COSINE_BAND: f32 = 0.1;

/// The documents' vectors, each set once.
#[derive(Debug, Default)]
pub(super) struct Vectors {
    slots: Box<[OnceLock<Box<[f32]>>]>,
    ready: AtomicUsize,
}

impl Vectors {
    pub(super) fn new(documents: usize) -> Self {
        Self {
            slots: (0..documents).map(|_| OnceLock::new()).collect(),
            ready: AtomicUsize::new(0),
        }
    }

    fn get(&self, doc: u32) -> Option<&[f32]> {
        self.slots.get(doc as usize)?.get().map(|v| &**v)
    }
}

/// The hex SHA-256 of `text`: the key a document's vector is stored under, with the model.
pub fn content_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Knowledge {
    /// Each indexed document's text, in document order (empty when nothing is retrieved).
    pub fn embedding_texts(&self, config: &TenantConfig) -> Vec<String> {
        let mut out = Vec::with_capacity(self.vectors.slots.len());
        if self.index.is_none() {
            return out;
        }
        if self.layout.catalog_retrieved {
            for o in &config.catalog.offerings {
                out.push(format!(
                    "{}\n{}\n{}\n{}",
                    o.name,
                    o.id.replace(['-', '_'], " "),
                    o.description,
                    o.schedule.as_deref().unwrap_or("")
                ));
            }
        }
        if self.layout.documents_retrieved {
            for p in &config.knowledge {
                out.push(format!("{}\n{}", p.heading, p.text));
            }
        }
        out
    }

    /// Sets document `doc`'s vector (normalised) unless it has one; whether it was set.
    pub fn set_vector(&self, doc: u32, vector: Vec<f32>) -> bool {
        let Some(slot) = self.vectors.slots.get(doc as usize) else {
            return false;
        };
        let Some(vector) = normalised(vector) else {
            return false;
        };
        let set = slot.set(vector).is_ok();
        if set {
            self.vectors.ready.fetch_add(1, Ordering::Relaxed);
        }
        set
    }

    /// How many documents have a vector.
    pub fn vectors_ready(&self) -> usize {
        self.vectors.ready.load(Ordering::Relaxed)
    }

    /// The best `limit` documents among offerings (`true`) or passages by cosine to `query`,
    /// within [`COSINE_BAND`] of the best and over [`MIN_COSINE`], as positions in the catalog
    /// or in `config.knowledge`.
    pub(super) fn vector_hits(&self, query: &[f32], limit: usize, offerings: bool) -> Vec<u32> {
        let Some(query) = normalised(query.to_vec()) else {
            return Vec::new();
        };
        let split = self.offerings;
        let docs = self.vectors.slots.len() as u32;
        let hits = vectors::nearest(
            &query,
            docs,
            |doc| self.vectors.get(doc),
            |doc| (doc < split) == offerings,
            limit,
        );
        let best = hits.first().map_or(0.0, |h| h.score);
        hits.into_iter()
            .filter(|h| h.score >= MIN_COSINE.max(best - COSINE_BAND))
            .map(|h| if offerings { h.doc } else { h.doc - split })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::english_tenant;
    use super::super::{Query, Retrieved};
    use super::*;
    use crate::model::embedding::FakeEmbedder;

    const MESSAGE: &str = "anything for a downpour?";

    /// The English shop's knowledge with every document's vector from `fake`.
    fn embedded(config: &TenantConfig, fake: &FakeEmbedder) -> Knowledge {
        let knowledge = Knowledge::build(config);
        for (doc, text) in knowledge.embedding_texts(config).iter().enumerate() {
            assert!(knowledge.set_vector(doc as u32, fake.vector(text)));
        }
        knowledge
    }

    fn retrieve(knowledge: &Knowledge, vector: Option<&[f32]>) -> Retrieved {
        knowledge.retrieve(Query {
            message: MESSAGE,
            vector,
            ..Query::default()
        })
    }

    /// The fake puts offering 37's text and the message side by side, far from the rest.
    fn fake(config: &TenantConfig) -> FakeEmbedder {
        let name = config.catalog.offerings[37].name.to_lowercase();
        let near = vec![0.0, 0.95, 0.3];
        FakeEmbedder::new(vec![(&name, vec![0.0, 1.0]), ("downpour", near)], 256)
    }

    #[test]
    fn knowledge_semantic_a_message_sharing_no_word_finds_the_offering_near_it() {
        let config = english_tenant(100);
        let fake = fake(&config);
        let knowledge = embedded(&config, &fake);
        assert_eq!(
            knowledge.vectors_ready(),
            knowledge.embedding_texts(&config).len()
        );
        let words_alone = retrieve(&knowledge, None);
        assert!(
            words_alone.miss && words_alone.offerings.is_empty(),
            "{words_alone:?}"
        );
        let query = fake.vector(MESSAGE);
        let got = retrieve(&knowledge, Some(&query));
        assert_eq!(
            got.offerings,
            [37],
            "only the near one, over the cosine floor"
        );
        assert!(!got.miss);
    }

    #[test]
    fn knowledge_semantic_without_vectors_or_without_the_query_retrieval_is_the_full_text_one() {
        let config = english_tenant(100);
        let fake = fake(&config);
        let bare = Knowledge::build(&config);
        let query = fake.vector(MESSAGE);
        let named = format!("the {} please", config.catalog.offerings[5].name);
        let by_words = |k: &Knowledge, vector: Option<&[f32]>| {
            k.retrieve(Query {
                message: &named,
                vector,
                ..Query::default()
            })
        };
        assert_eq!(by_words(&bare, Some(&query)), by_words(&bare, None));
        let knowledge = embedded(&config, &fake);
        assert_eq!(by_words(&knowledge, None), by_words(&bare, None));
        // Both rankings: the named offering stays first.
        assert_eq!(by_words(&knowledge, Some(&query)).offerings[0], 5);
    }

    #[test]
    fn knowledge_semantic_a_changed_offering_changes_its_content_hash_alone() {
        let config = english_tenant(60);
        let mut changed = config.clone();
        changed.catalog.offerings[3]
            .description
            .push_str(" Now waterproof.");
        let hashes = |c: &TenantConfig| -> Vec<String> {
            Knowledge::build(c)
                .embedding_texts(c)
                .iter()
                .map(|t| content_hash(t))
                .collect()
        };
        let (before, after) = (hashes(&config), hashes(&changed));
        assert_eq!(before.len(), 60 + config.knowledge.len());
        let differ: Vec<usize> = (0..before.len())
            .filter(|&i| before[i] != after[i])
            .collect();
        assert_eq!(differ, [3]);
        assert_eq!(before[0].len(), 64, "hex SHA-256");
    }
}
