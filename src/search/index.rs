//! The inverted index and its BM25 ranking, with a one-edit fallback on names.
//!
//! Scoring: Okapi BM25 (k1 1.2, b 0.75) over the query's distinct words; a word with several
//! stems (one per language) adds each stem's share, so stemming for three languages does not
//! count a word three times. A word of four letters or more that no document holds is matched
//! instead, at [`FUZZY_WEIGHT`], to the words within one edit (a letter added, dropped, changed
//! or two swapped) among the fields marked `name`: "guitarr" finds "guitarra". A document whose
//! whole name is in the query (each of its name's words, exactly or within that one edit)
//! ranks above every document that only shares some words with it, so "the Lite tent or the
//! Trail stove" finds those two, not a Lite stove. A term nearly every document holds (its idf
//! under [`MIN_IDF`]: a stop word) is skipped. "Whole" means in order and side by side, each
//! word exactly or within one edit: a catalog whose names combine the same few words (a brand,
//! a model, a colour) tells "the Lite tent slate or the Trail stove moss" from a Lite stove.

use std::collections::{HashMap, HashSet};

use super::analyze::{Analyzer, Language};

const K1: f32 = 1.2;
const B: f32 = 0.75;
/// A misspelt word's match counts this much of an exact one.
const FUZZY_WEIGHT: f32 = 0.7;
/// The shortest word (in characters) the fuzzy fallback tries: shorter words have too many
/// neighbours one edit away.
const FUZZY_MIN_CHARS: usize = 4;
/// A term this common adds nothing worth its postings.
const MIN_IDF: f32 = 0.05;

/// A term's documents, with the term's count in each.
type Postings = Box<[(u32, u16)]>;
/// A name's word and its term ids.
type NameWord = (Box<str>, Box<[u32]>);

/// One field of a document: its text and how much a word in it counts.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    pub text: &'a str,
    /// A word here counts this many times (a name over a description).
    pub weight: u32,
    /// The document's name (or heading): its words are candidates for the one-edit fallback,
    /// and a query that holds all of them ranks the document first.
    pub name: bool,
}

/// A document a search found, with its score (higher is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: u32,
    pub score: f32,
}

/// Collects documents; [`IndexBuilder::build`] freezes them into an [`Index`].
pub struct IndexBuilder {
    analyzer: Analyzer,
    terms: HashMap<String, u32>,
    postings: Vec<Vec<(u32, u16)>>,
    doc_len: Vec<u32>,
    /// Words of name fields → their term ids.
    names: HashMap<String, Vec<u32>>,
    /// Per document, its name's words in order, each as its first term id.
    whole_names: Vec<Box<[u32]>>,
}

impl IndexBuilder {
    pub fn new(languages: &[Language]) -> Self {
        Self {
            analyzer: Analyzer::new(languages),
            terms: HashMap::new(),
            postings: Vec::new(),
            doc_len: Vec::new(),
            names: HashMap::new(),
            whole_names: Vec::new(),
        }
    }

    /// Adds a document; its number is its position (0, 1, …).
    pub fn add(&mut self, fields: &[Field<'_>]) -> u32 {
        let doc = self.doc_len.len() as u32;
        let mut counts: HashMap<u32, u32> = HashMap::new();
        let mut len = 0u32;
        let mut name_terms: Vec<u32> = Vec::new();
        for field in fields {
            for (word, stems) in self.analyzer.analyze(field.text) {
                let mut ids = Vec::with_capacity(stems.len());
                for stem in stems {
                    let next = self.terms.len() as u32;
                    let id = *self.terms.entry(stem).or_insert(next);
                    if id == next {
                        self.postings.push(Vec::new());
                    }
                    *counts.entry(id).or_default() += field.weight;
                    ids.push(id);
                }
                len += field.weight;
                if field.name {
                    name_terms.push(ids[0]);
                    if word.chars().count() >= FUZZY_MIN_CHARS {
                        self.names.entry(word).or_insert(ids);
                    }
                }
            }
        }
        for (term, count) in counts {
            self.postings[term as usize].push((doc, count.min(u32::from(u16::MAX)) as u16));
        }
        self.doc_len.push(len);
        self.whole_names.push(name_terms.into_boxed_slice());
        doc
    }

    pub fn build(self) -> Index {
        let docs = self.doc_len.len();
        let total: u64 = self.doc_len.iter().map(|l| u64::from(*l)).sum();
        let avg_len = if docs == 0 {
            1.0
        } else {
            (total as f32 / docs as f32).max(1.0)
        };
        let mut names: Vec<NameWord> = self
            .names
            .into_iter()
            .map(|(w, ids)| (w.into_boxed_str(), ids.into_boxed_slice()))
            .collect();
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut deletions: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        for (i, (word, _)) in names.iter().enumerate() {
            for key in deletion_keys(word) {
                deletions
                    .entry(key.into_boxed_str())
                    .or_default()
                    .push(i as u32);
            }
        }
        Index {
            analyzer: self.analyzer,
            terms: self
                .terms
                .into_iter()
                .map(|(t, id)| (t.into_boxed_str(), id))
                .collect(),
            postings: self
                .postings
                .into_iter()
                .map(Vec::into_boxed_slice)
                .collect(),
            doc_len: self.doc_len.into_boxed_slice(),
            avg_len,
            names: names.into_boxed_slice(),
            deletions,
            whole_names: self.whole_names.into_boxed_slice(),
        }
    }
}

/// A frozen index: searched by many turns at once, never changed.
pub struct Index {
    analyzer: Analyzer,
    terms: HashMap<Box<str>, u32>,
    postings: Box<[Postings]>,
    doc_len: Box<[u32]>,
    avg_len: f32,
    /// The fuzzy fields' words, sorted, with their term ids.
    names: Box<[NameWord]>,
    /// Each name and each of its one-letter deletions → the names it came from.
    deletions: HashMap<Box<str>, Vec<u32>>,
    /// Per document, its name's words in order (first term ids).
    whole_names: Box<[Box<[u32]>]>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("docs", &self.doc_len.len())
            .field("terms", &self.terms.len())
            .finish()
    }
}

impl Index {
    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// The best `limit` documents `accept` takes for `query`, best first (ties by number).
    pub fn search(&self, query: &str, limit: usize, accept: impl Fn(u32) -> bool) -> Vec<Hit> {
        let docs = self.doc_len.len();
        if docs == 0 || limit == 0 {
            return Vec::new();
        }
        let mut scores = vec![0f32; docs];
        let mut touched: Vec<u32> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        // Every term the query holds, exactly or within one edit, and per word in order.
        let mut held: HashSet<u32> = HashSet::new();
        let mut sequence: Vec<Vec<u32>> = Vec::new();
        for (word, stems) in self.analyzer.analyze(query) {
            let first = seen.insert(word.clone());
            let exact: Vec<u32> = stems
                .iter()
                .filter_map(|s| self.terms.get(s.as_str()).copied())
                .collect();
            let (ids, weight) = if !exact.is_empty() {
                let share = 1.0 / exact.len() as f32;
                (exact, share)
            } else {
                let near = self.near_names(&word);
                if near.is_empty() {
                    sequence.push(Vec::new());
                    continue;
                }
                let share = FUZZY_WEIGHT / near.len() as f32;
                (near, share)
            };
            held.extend(ids.iter().copied());
            sequence.push(ids.clone());
            if !first {
                continue;
            }
            for id in ids {
                self.add_term(id, weight, &mut scores, &mut touched);
            }
        }
        // A whole name in the query outranks any partial match.
        let best = touched
            .iter()
            .map(|&d| scores[d as usize])
            .fold(0f32, f32::max);
        for &doc in &touched {
            let name = &self.whole_names[doc as usize];
            if !name.is_empty()
                && name.iter().all(|t| held.contains(t))
                && sequence
                    .windows(name.len())
                    .any(|run| run.iter().zip(name.iter()).all(|(at, t)| at.contains(t)))
            {
                scores[doc as usize] += best;
            }
        }
        let mut hits: Vec<Hit> = touched
            .into_iter()
            .filter(|d| accept(*d))
            .map(|doc| Hit {
                doc,
                score: scores[doc as usize],
            })
            .filter(|h| h.score > 0.0)
            .collect();
        hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        hits.truncate(limit);
        hits
    }

    fn add_term(&self, term: u32, weight: f32, scores: &mut [f32], touched: &mut Vec<u32>) {
        let postings = &self.postings[term as usize];
        let n = self.doc_len.len() as f32;
        let df = postings.len() as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        if idf < MIN_IDF {
            return;
        }
        for &(doc, tf) in postings.iter() {
            let tf = f32::from(tf);
            let len = self.doc_len[doc as usize] as f32;
            let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg_len));
            let slot = &mut scores[doc as usize];
            if *slot == 0.0 {
                touched.push(doc);
            }
            *slot += weight * idf * norm;
        }
    }

    /// The term ids of the names one edit from `word` (none for a short word).
    fn near_names(&self, word: &str) -> Vec<u32> {
        if word.chars().count() < FUZZY_MIN_CHARS {
            return Vec::new();
        }
        let mut found: Vec<u32> = Vec::new();
        for key in deletion_keys(word) {
            let Some(names) = self.deletions.get(key.as_str()) else {
                continue;
            };
            for &i in names {
                let (name, ids) = &self.names[i as usize];
                if one_edit(word, name) {
                    for id in ids.iter() {
                        if !found.contains(id) {
                            found.push(*id);
                        }
                    }
                }
            }
        }
        found
    }
}

/// `word` and every string it becomes with one character removed.
fn deletion_keys(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut keys = Vec::with_capacity(chars.len() + 1);
    keys.push(word.to_owned());
    for i in 0..chars.len() {
        let key: String = chars
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, c)| *c)
            .collect();
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// Whether `a` and `b` differ by at most one edit: a character inserted, deleted or replaced,
/// or two neighbours swapped.
fn one_edit(a: &str, b: &str) -> bool {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (short, long) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    match long.len() - short.len() {
        0 => {
            let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
            match diff.as_slice() {
                [] | [_] => true,
                [i, j] => *j == i + 1 && a[*i] == b[*j] && a[*j] == b[*i],
                _ => false,
            }
        }
        1 => {
            let first = (0..short.len())
                .find(|&i| short[i] != long[i])
                .unwrap_or(short.len());
            short[first..] == long[first + 1..]
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(docs: &[(&str, &str)]) -> Index {
        let mut builder = IndexBuilder::new(&Language::ALL);
        for (name, body) in docs {
            builder.add(&[
                Field {
                    text: name,
                    weight: 3,
                    name: true,
                },
                Field {
                    text: body,
                    weight: 1,
                    name: false,
                },
            ]);
        }
        builder.build()
    }

    fn top(index: &Index, query: &str) -> Option<u32> {
        index.search(query, 1, |_| true).first().map(|h| h.doc)
    }

    #[test]
    fn search_bm25_ranks_the_document_with_the_rarer_words_first() {
        let index = index(&[
            ("Guitarra clásica", "Madera de cedro, para principiantes"),
            ("Guitarra eléctrica", "Con amplificador y cable"),
            ("Ukelele soprano", "Madera de caoba"),
        ]);
        assert_eq!(
            top(&index, "¿cuánto cuesta la guitarra eléctrica?"),
            Some(1)
        );
        assert_eq!(
            top(&index, "una guitarra de madera para principiantes"),
            Some(0)
        );
        assert_eq!(top(&index, "ukeleles"), Some(2), "plural stemmed");
        assert!(index.search("bicicleta", 5, |_| true).is_empty());
    }

    #[test]
    fn search_a_name_without_accents_or_with_one_typo_still_matches() {
        let index = index(&[
            ("Canción de cuna", "Partitura"),
            ("Pandeiro de couro", "Percussão"),
            ("Tambor", "Percusión"),
        ]);
        assert_eq!(top(&index, "CANCION"), Some(0), "accents folded");
        assert_eq!(top(&index, "pandiero"), Some(1), "two letters swapped");
        assert_eq!(top(&index, "tambr"), Some(2), "a letter dropped");
        assert_eq!(top(&index, "cancipn"), Some(0), "a letter changed");
        assert!(index.search("xyzw", 5, |_| true).is_empty());
    }

    #[test]
    fn search_whole_names_in_the_query_outrank_partial_matches() {
        let index = index(&[
            ("Lite tent slate", ""),
            ("Lite stove slate", ""),
            ("Trail stove moss", ""),
            ("Trail tent moss", ""),
        ]);
        let hits = index.search("the lite tent slate or the trail stove moss?", 2, |_| true);
        let mut docs: Vec<u32> = hits.iter().map(|h| h.doc).collect();
        docs.sort_unstable();
        assert_eq!(docs, [0, 2]);
    }

    #[test]
    fn search_one_edit_is_exactly_one_edit() {
        assert!(one_edit("guitarra", "guitara"));
        assert!(one_edit("guitarra", "giutarra"));
        assert!(one_edit("guitarra", "guitarro"));
        assert!(!one_edit("guitarra", "gitara"));
        assert!(!one_edit("abcd", "badc"));
    }

    #[test]
    fn search_accept_filters_and_limit_bounds_the_hits() {
        let index = index(&[("red shirt", ""), ("red hat", ""), ("red shoe", "")]);
        let hits = index.search("red", 5, |d| d != 1);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(index.search("red", 1, |_| true).len(), 1);
    }
}
