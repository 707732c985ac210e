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

/// `prune_embeddings` deletes the rows of every model last used before the cutoff and answers
/// how many: a row saved or marked used (`touch_embeddings`) since stays, a mark never moves a
/// row's time back, marking a hash not stored adds nothing, and each model's row is judged by
/// its own time (the same hash may go for one model and stay for another).
pub async fn embeddings_unused_since_the_cutoff_are_pruned(store: &dyn Store) {
    // Long before every other case's instants, so the rows this prune meets are this case's.
    let day = |n: i64| t0() - chrono::Duration::days(1_000 - n);
    let model = format!("openai:invented-{}", Uuid::new_v4());
    let other = format!("{model}-other");
    let [a, b, c, z] = ["a", "b", "c", "z"].map(|x| x.repeat(64));
    let vector = |hash: &String| (hash.clone(), vec![0.5f32, -0.5]);
    let save = |model: &str, hashes: &[&String], at| {
        let rows: Vec<_> = hashes.iter().map(|h| vector(h)).collect();
        let model = model.to_owned();
        async move {
            store
                .save_embeddings(&model, &rows, at)
                .await
                .expect("save_embeddings");
        }
    };
    save(&model, &[&a, &b], day(0)).await;
    save(&model, &[&c], day(15)).await;
    save(&other, &[&a, &b], day(0)).await;
    let touch = |model: &str, hashes: Vec<String>, at| {
        let model = model.to_owned();
        async move {
            store
                .touch_embeddings(&model, &hashes, at)
                .await
                .expect("touch_embeddings");
        }
    };
    // A load of `model` used a (and asked for z, never stored); one of `other` used b.
    touch(&model, vec![a.clone(), z.clone()], day(20)).await;
    touch(&other, vec![b.clone()], day(20)).await;
    // An older mark leaves c's later save time as it is.
    touch(&model, vec![c.clone()], day(1)).await;

    let deleted = store
        .prune_embeddings(day(10))
        .await
        .expect("prune_embeddings");
    assert_eq!(deleted, 2, "model's b and other's a, unused since day 0");

    let hashes = |model: &str| {
        let model = model.to_owned();
        let asked = vec![a.clone(), b.clone(), c.clone(), z.clone()];
        async move {
            let mut got: Vec<String> = store
                .embeddings(&model, &asked)
                .await
                .expect("embeddings")
                .into_iter()
                .map(|(hash, _)| hash)
                .collect();
            got.sort();
            got
        }
    };
    assert_eq!(
        hashes(&model).await,
        [a.clone(), c.clone()],
        "a marked used, c saved after the cutoff; z never stored"
    );
    assert_eq!(hashes(&other).await, [b], "judged by its own time");
    assert_eq!(
        store.prune_embeddings(day(10)).await.expect("again"),
        0,
        "nothing left to delete"
    );
    assert_eq!(
        store.prune_embeddings(day(21)).await.expect("later"),
        3,
        "past every mark, every row of this case goes"
    );
}
