//! Conformance: the knowledge's stored vectors (`EmbeddingStore`).

use super::*;

/// A vector is stored once per model and content hash: read back exactly (every float's bits),
/// a hash not stored is left out, another model's vector is its own, and saving a stored hash
/// again keeps the first vector.
pub async fn embeddings_are_kept_once_per_model_and_content_hash(store: &dyn Store) {
    // A model name of its own, so the case shares nothing with another run on this store.
    let model = format!("openai:invented-{}", Uuid::new_v4());
    let other = format!("{model}-other");
    let a = ("a".repeat(64), vec![0.25f32, -1.5, 3.0e-7, f32::MAX]);
    let b = ("b".repeat(64), vec![1.0f32, 0.0, -0.0, 0.125]);
    let none = store
        .embeddings(&model, &[a.0.clone(), b.0.clone()])
        .await
        .expect("embeddings");
    assert!(none.is_empty(), "nothing stored yet");

    store
        .save_embeddings(&model, &[a.clone(), b.clone()], at_s(1))
        .await
        .expect("save");
    store
        .save_embeddings(&other, &[(a.0.clone(), vec![9.0, 9.0])], at_s(1))
        .await
        .expect("save another model's");
    // The same hash again: the first vector stays.
    store
        .save_embeddings(&model, &[(a.0.clone(), vec![7.0, 7.0])], at_s(2))
        .await
        .expect("save again");

    let mut got = store
        .embeddings(&model, &[a.0.clone(), "c".repeat(64), b.0.clone()])
        .await
        .expect("embeddings");
    got.sort_by(|x, y| x.0.cmp(&y.0));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(got.len(), 2, "the unknown hash is left out");
    assert_eq!(got[0].0, a.0);
    assert_eq!(
        bits(&got[0].1),
        bits(&a.1),
        "kept exactly, and the first one"
    );
    assert_eq!(bits(&got[1].1), bits(&b.1));
    let theirs = store
        .embeddings(&other, std::slice::from_ref(&a.0))
        .await
        .expect("embeddings");
    assert_eq!(theirs, vec![(a.0.clone(), vec![9.0, 9.0])], "per model");
}
