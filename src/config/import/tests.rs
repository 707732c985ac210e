//! `catalog import` on the invented fixtures of `tests/fixtures/catalog-import/`.

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/catalog-import")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn offerings(imported: &Imported) -> Vec<(u64, &str, &str, i64)> {
    imported
        .offerings
        .iter()
        .map(|(line, o)| (*line, o.id.as_str(), o.name.as_str(), o.price.amount))
        .collect()
}

fn refusals(result: Result<Imported, Vec<RowIssue>>) -> Vec<String> {
    result
        .expect_err("the import is refused")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn catalog_import_reads_a_shopify_export_one_offering_per_variant_skipping_drafts() {
    let imported = import_csv(&fixture("shopify.csv"), None, "EUR").unwrap();
    assert_eq!(imported.format, Format::Shopify);
    assert_eq!(
        offerings(&imported),
        [
            (2, "glaze-sampler", "Glaze Sampler Evening", 4500),
            (
                5,
                "throwing-tools-standard-sand",
                "Throwing Tool Kit (Standard / Sand)",
                2490
            ),
            (
                6,
                "throwing-tools-deluxe-charcoal",
                "Throwing Tool Kit (Deluxe / Charcoal)",
                3900
            ),
        ]
    );
    let sampler = &imported.offerings[0].1;
    assert_eq!(
        sampler.description,
        "Try six glazes on test tiles.\n\nTwo hours\nTiles fired & posted"
    );
    assert_eq!(sampler.price.currency, "EUR");
    assert!(
        imported
            .notes
            .iter()
            .any(|n| n.starts_with("skipped 1 products not on sale") && n.ends_with("lines 7")),
        "{:?}",
        imported.notes
    );
}

#[test]
fn catalog_import_reads_a_woocommerce_export_with_variations_and_the_regular_price() {
    let imported = import_csv(&fixture("woocommerce.csv"), None, "GBP").unwrap();
    assert_eq!(imported.format, Format::WooCommerce);
    assert_eq!(
        offerings(&imported),
        [
            (2, "clay-10", "Stoneware Clay 10 kg", 1850),
            (4, "wc-103", "Studio Apron - Rust", 2200),
            (5, "apron-slate", "Studio Apron (Slate)", 2200),
            (7, "wc-106", "Gift Card", 3000),
        ]
    );
    let slate = &imported.offerings[2].1;
    assert_eq!(slate.description, "Heavy cotton apron with two pockets.");
    assert_eq!(
        imported.offerings[0].1.description,
        "Buff stoneware, fires to 1280 °C."
    );
    let notes = imported.notes.join("\n");
    assert!(
        notes.contains("skipped 1 products not published"),
        "{notes}"
    );
    assert!(notes.contains("skipped 1 grouped products"), "{notes}");
    assert!(notes.contains("1 products have a Sale price"), "{notes}");
}

#[test]
fn catalog_import_reads_the_generic_layout_deriving_a_missing_id_from_the_name() {
    let imported = import_csv(&fixture("generic.csv"), None, "USD").unwrap();
    assert_eq!(imported.format, Format::Generic);
    assert_eq!(
        offerings(&imported),
        [
            (2, "raku-weekend", "Raku Weekend", 18000),
            (3, "handbuilding-night", "Handbuilding Night", 3550),
        ]
    );
    let raku = &imported.offerings[0].1;
    assert_eq!(
        raku.url.as_deref(),
        Some("https://lakeview.example.test/raku")
    );
    assert_eq!(
        raku.schedule.as_deref(),
        Some("Saturdays and Sundays, 10:00-16:00")
    );
    assert_eq!(raku.duration_hours, Some(12.0));
    let night = &imported.offerings[1].1;
    assert_eq!(
        night.description, "Handbuilding Night",
        "the name stands in"
    );
    assert!(
        imported
            .notes
            .iter()
            .any(|n| n.starts_with("1 products have no description"))
    );
}

#[test]
fn catalog_import_prices_a_zero_decimal_currency_in_whole_units() {
    let imported = import_csv(b"name,price\nTea bowl,5000.00\n", None, "JPY").unwrap();
    assert_eq!(imported.offerings[0].1.price.amount, 5000);
    let refused = refusals(import_csv(b"name,price\nTea bowl,5000.50\n", None, "JPY"));
    assert_eq!(
        refused,
        ["line 2, column `price`: must be a whole number: the catalog's currency has no decimals"]
    );
}

#[test]
fn catalog_import_refuses_every_bad_row_by_line_and_column_with_the_rule() {
    let refused = refusals(import_csv(&fixture("bad-price.csv"), None, "EUR"));
    assert_eq!(
        refused,
        [
            "line 3, column `price`: must be a price written as a plain decimal number, such as \
             19.90 (digits and one '.', no currency sign, no thousands separator, not negative)",
            "line 4, column `id`: must be an id: lowercase letters, digits, _ and -, at most 64 \
             characters",
            "line 5, column `price`: must have at most 2 decimals in the catalog's currency",
            "line 6, column `id`: makes the id `raku-weekend` that line 2 already made: ids must \
             be unique",
        ]
    );
}

#[test]
fn catalog_import_refuses_a_file_missing_its_price_column() {
    assert_eq!(
        refusals(import_csv(
            &fixture("missing-price.csv"),
            Some(Format::Generic),
            "EUR"
        )),
        ["line 1: the header row has no price column, which this layout needs"]
    );
    assert_eq!(
        refusals(import_csv(&fixture("missing-price.csv"), None, "EUR")),
        [
            "line 1: the header row matches no layout: Shopify's has Handle (or URL handle) and \
          Title, WooCommerce's Regular price, the generic one name and price (pass --format to \
          say which)"
        ]
    );
}

#[test]
fn catalog_import_refuses_an_empty_binary_or_badly_encoded_file_whole() {
    assert_eq!(
        refusals(import_csv(&fixture("empty.csv"), None, "EUR")),
        ["is empty"]
    );
    assert_eq!(
        refusals(import_csv(&fixture("binary.csv"), None, "EUR")),
        ["line 2: is binary (it holds NUL bytes), not a CSV file"]
    );
    assert_eq!(
        refusals(import_csv(&fixture("latin1.csv"), None, "EUR")),
        ["line 2: is not valid UTF-8: save it as CSV UTF-8 (a spreadsheet's \"CSV UTF-8\" export)"]
    );
    assert_eq!(
        refusals(import_csv(b"\xFF\xFEn\0a\0", None, "EUR")),
        ["is UTF-16 text: save it as CSV UTF-8 (a spreadsheet's \"CSV UTF-8\" export)"]
    );
    assert_eq!(
        refusals(import_csv(b"name,price\n", None, "EUR")),
        ["holds no product to import (only a header, or only skipped rows)"]
    );
}

#[test]
fn catalog_import_reads_quoted_multi_line_fields_semicolons_and_a_bom() {
    let csv = "\u{feff}name;price;description\n\"Mug; large\";12.5;\"Line one\n\nline \"\"two\"\"\"\nBowl;8;x\n";
    let imported = import_csv(csv.as_bytes(), None, "EUR").unwrap();
    assert_eq!(
        offerings(&imported),
        [
            (2, "mug-large", "Mug; large", 1250),
            (5, "bowl", "Bowl", 800)
        ]
    );
    assert_eq!(
        imported.offerings[0].1.description,
        "Line one\n\nline \"two\""
    );
}

#[test]
fn catalog_import_cuts_a_long_description_at_a_word_and_says_so() {
    let long = "word ".repeat(1000);
    let csv = format!("name,price,description\nMug,10,\"{long}\"\n");
    let imported = import_csv(csv.as_bytes(), None, "EUR").unwrap();
    let description = &imported.offerings[0].1.description;
    assert!(description.chars().count() <= MAX_DESCRIPTION_CHARS);
    assert!(description.ends_with("word…"), "{description}");
    assert!(
        imported.notes[0].starts_with("1 descriptions were cut"),
        "{:?}",
        imported.notes
    );
}

#[test]
fn catalog_import_never_quotes_a_cell_in_a_refusal() {
    let csv = "name,price,url\nsecret-name-7,secret-price-7,http://secret-url-7\n";
    for refusal in refusals(import_csv(csv.as_bytes(), None, "EUR")) {
        assert!(!refusal.contains("secret"), "{refusal}");
    }
}
