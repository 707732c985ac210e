//! Vectors compared by cosine similarity, brute force, and rankings fused by reciprocal rank.
//!
//! A stored vector is normalised once ([`normalised`]), so a search is one dot product per
//! document; brute force over 20,000 × 1,536 floats is measured in `benches/knowledge.rs`
//! (docs/PERFORMANCE.md). Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009) scores a
//! document `Σ 1 / (RRF_K + rank)` over the rankings that hold it (ranks from 1): it needs no
//! common scale between BM25 scores and cosines, and a document both rankings agree on comes
//! first.

use super::index::Hit;

/// The fusion's constant: the value its authors found robust; it keeps a first rank from
/// outweighing agreement between the rankings.
pub const RRF_K: f32 = 60.0;

/// `vector` scaled to unit length (`None`: empty, zero or not finite).
pub fn normalised(mut vector: Vec<f32>) -> Option<Box<[f32]>> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if vector.is_empty() || !norm.is_normal() {
        return None;
    }
    for x in &mut vector {
        *x /= norm;
    }
    Some(vector.into_boxed_slice())
}

/// Independent sums a dot product keeps: a single running sum of floats cannot be reordered,
/// so the compiler would not use vector instructions; sixteen lanes let it.
const LANES: usize = 16;

/// The dot product of two vectors of one length (the cosine of two normalised ones).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let (chunks_a, chunks_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut lanes = [0f32; LANES];
    for (x, y) in chunks_a.zip(chunks_b) {
        // Whole arrays: no bounds check in the loop below.
        let (Ok(x), Ok(y)) = (<&[f32; LANES]>::try_from(x), <&[f32; LANES]>::try_from(y)) else {
            continue;
        };
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The best `limit` documents by cosine to `query` (normalised), among those `vector` gives one
/// of the query's length and `accept` takes; best first, ties by number.
pub fn nearest<'v>(
    query: &[f32],
    docs: u32,
    vector: impl Fn(u32) -> Option<&'v [f32]>,
    accept: impl Fn(u32) -> bool,
    limit: usize,
) -> Vec<Hit> {
    if limit == 0 {
        return Vec::new();
    }
    let mut hits: Vec<Hit> = (0..docs)
        .filter(|&doc| accept(doc))
        .filter_map(|doc| {
            let v = vector(doc).filter(|v| v.len() == query.len())?;
            Some(Hit {
                doc,
                score: dot(query, v),
            })
        })
        .collect();
    let cut = limit.min(hits.len());
    if cut == 0 {
        return Vec::new();
    }
    let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
    hits.select_nth_unstable_by(cut - 1, order);
    hits.truncate(cut);
    hits.sort_unstable_by(order);
    hits
}

/// The documents of `rankings` (each best first) by reciprocal rank fusion, best first (ties:
/// the first ranking's order, then number).
pub fn fuse(rankings: &[&[u32]]) -> Vec<u32> {
    let mut scores: Vec<(u32, f32, usize)> = Vec::new();
    for (which, ranking) in rankings.iter().enumerate() {
        for (rank, &doc) in ranking.iter().enumerate() {
            let add = 1.0 / (RRF_K + rank as f32 + 1.0);
            // The first place a document was met breaks ties: the earlier ranking's order.
            let key = which * 100_000 + rank;
            match scores.iter_mut().find(|(d, _, _)| *d == doc) {
                Some(entry) => entry.1 += add,
                None => scores.push((doc, add, key)),
            }
        }
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    scores.into_iter().map(|(doc, _, _)| doc).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_nearest_ranks_by_cosine_and_skips_missing_or_other_lengths() {
        let docs: Vec<Option<Box<[f32]>>> = vec![
            normalised(vec![1.0, 0.0]),
            normalised(vec![0.7, 0.7]),
            None,
            normalised(vec![0.0, 1.0]),
            normalised(vec![1.0, 0.0, 0.0]),
        ];
        let query = normalised(vec![0.9, 0.1]).unwrap();
        let hits = nearest(&query, 5, |d| docs[d as usize].as_deref(), |_| true, 3);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [0, 1, 3]);
        assert!(hits[0].score > 0.99 && hits[0].score <= 1.0 + 1e-6);
        let none = nearest(&query, 5, |d| docs[d as usize].as_deref(), |d| d == 2, 3);
        assert!(none.is_empty());
        assert!(normalised(vec![0.0, 0.0]).is_none());
    }

    #[test]
    fn search_dot_is_the_sum_of_products_at_any_length() {
        for len in [1, 15, 16, 17, 1536] {
            let a: Vec<f32> = (0..len).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..len).map(|i| (i % 5) as f32 * 0.5).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!(
                (dot(&a, &b) - plain).abs() <= 1e-3 * plain.abs().max(1.0),
                "{len}"
            );
        }
    }

    #[test]
    fn search_fusion_puts_what_both_rankings_hold_first() {
        // 7 is second in both: it beats each list's first, held by one list only.
        assert_eq!(fuse(&[&[1, 7, 3], &[9, 7, 4]]), [7, 1, 9, 3, 4]);
        assert_eq!(
            fuse(&[&[2, 5], &[]]),
            [2, 5],
            "one ranking alone keeps its order"
        );
        assert!(fuse(&[]).is_empty());
    }
}
