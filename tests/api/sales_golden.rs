//! The sales golden suites with the mock model: on the demo tenant (023 item 5, 028 item 7, 032
//! item 5 and 034 item 6) and on a second, invented vertical (042: the sales layer sells offerings,
//! not courses).

use crate::helpers::*;

/// Runs the sales golden `suite` on the tenant in `config` (the demo's shipped examples alone,
/// never the repo's `config/`, where an operator's own files live).
async fn sales_suite_passes(config: &std::path::Path, suite: &str, at_least: usize) {
    let env: std::collections::HashMap<String, String> =
        [("CONFIG_DIR".to_owned(), config.display().to_string())].into();
    let report = manychat_agent::evals::runner::run(&env, &repo_path(suite), Some("mock:demo"))
        .await
        .expect("suite runs");
    assert!(
        report.results.len() >= at_least,
        "{} cases",
        report.results.len()
    );
    assert_eq!(report.failed(), 0, "{report}");
}

/// SALES 023 item 5, 028 item 7, 032 item 5 and 034 item 6 on the demo tenant.
#[tokio::test]
async fn sales_golden_suite_passes_on_the_demo_tenant() {
    sales_suite_passes(
        &manychat_agent::config::examples::shipped_examples(),
        "evals/sales-demo",
        26,
    )
    .await;
}

/// The same rules on an invented bicycle workshop (042: the sales layer sells offerings, not
/// courses): its own catalog, fields and flows, no payment options.
#[tokio::test]
async fn sales_golden_suite_passes_on_a_second_vertical() {
    sales_suite_passes(
        &repo_path("tests/fixtures/tenant-cycle"),
        "evals/tenant-cycle",
        13,
    )
    .await;
}
