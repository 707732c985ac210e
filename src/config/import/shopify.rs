//! Shopify's product export. Both generations of its header are read: `Handle`, `Title`,
//! `Body (HTML)`, `Variant Price`, `Option1 Value`…, `Published`, `Status`, and the newer
//! `URL handle`, `Title`, `Description`, `Price`, `Option1 value`…, `Published on online store`,
//! `Status`.
//!
//! A product is the rows sharing a handle: the first holds its title and description, each row
//! with a price or an option value is a variant, and a row with neither (an extra image) is
//! passed over. One variant makes one offering, id the handle; several make one offering each,
//! id the handle and the variant's option values (`mug-blue-large`), named
//! `Title (Blue / Large)`. A product whose `Status` is not `active`, or (without `Status`)
//! whose `Published` is `false`, is skipped and counted.

use super::*;

pub(super) fn read(table: &Table, out: &mut Output) {
    let handle = table.required(&["handle", "url handle"], "Handle (or URL handle)", out);
    let title = table.required(&["title"], "Title", out);
    let price = table.required(&["variant price", "price"], "Variant Price (or Price)", out);
    let (Some(handle), Some(title), Some(price)) = (handle, title, price) else {
        return;
    };
    let body = table.column(&["body (html)", "description"]);
    let status = table.column(&["status"]);
    let published = table.column(&["published", "published on online store"]);
    let options: Vec<Option<usize>> = (1..=3)
        .map(|n| table.column(&[&format!("option{n} value")]))
        .collect();

    // Products by handle, in the order they first appear.
    let mut order: Vec<String> = Vec::new();
    let mut products: HashMap<String, Vec<&(u64, csv::StringRecord)>> = HashMap::new();
    for row in &table.rows {
        let key = cell(&row.1, Some(handle)).to_owned();
        if key.is_empty() {
            out.issues.push(RowIssue::at(
                row.0,
                table.header(handle),
                "must not be empty: every row names its product's handle",
            ));
            continue;
        }
        if !products.contains_key(&key) {
            order.push(key.clone());
        }
        products.entry(key).or_default().push(row);
    }

    let mut skipped = Vec::new();
    for key in order {
        let rows = &products[&key];
        let (line, first) = rows
            .iter()
            .find(|(_, r)| !cell(r, Some(title)).is_empty())
            .map_or((rows[0].0, &rows[0].1), |(l, r)| (*l, r));
        let on_sale = match cell(first, status).to_ascii_lowercase().as_str() {
            "" => !cell(first, published).eq_ignore_ascii_case("false"),
            status => status == "active",
        };
        if !on_sale {
            skipped.push(line);
            continue;
        }
        let name = cell(first, Some(title)).to_owned();
        let description = html::to_text(cell(first, body));
        let base = crate::config::slug::slug(&key, MAX_ID_CHARS);
        let variants: Vec<&&(u64, csv::StringRecord)> = rows
            .iter()
            .filter(|(_, r)| {
                !cell(r, Some(price)).is_empty() || options.iter().any(|o| !cell(r, *o).is_empty())
            })
            .collect();
        let single = variants.len() <= 1;
        let variants: Vec<(u64, &csv::StringRecord)> = if variants.is_empty() {
            vec![(line, first)]
        } else {
            variants.iter().map(|(l, r)| (*l, r)).collect()
        };
        for (n, (line, row)) in variants.into_iter().enumerate() {
            let values: Vec<&str> = options
                .iter()
                .map(|o| cell(row, *o))
                .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("default title"))
                .collect();
            let (id, name) = if single || base.is_empty() {
                (base.clone(), name.clone())
            } else {
                let suffix = crate::config::slug::slug(&values.join(" "), MAX_ID_CHARS);
                let suffix = if suffix.is_empty() {
                    (n + 1).to_string()
                } else {
                    suffix
                };
                let id = crate::config::slug::slug(&format!("{base}-{suffix}"), MAX_ID_CHARS);
                let name = if values.is_empty() {
                    name.clone()
                } else {
                    format!("{name} ({})", values.join(" / "))
                };
                (id, name)
            };
            out.drafts.push(Draft::from_shop_row(
                table,
                ShopColumns {
                    id: handle,
                    name: title,
                    price,
                },
                (line, row),
                id,
                name,
                description.clone(),
            ));
        }
    }
    if !skipped.is_empty() {
        out.notes.push(format!(
            "skipped {} products not on sale (Status not active, or Published false): lines {}",
            skipped.len(),
            lines(&skipped)
        ));
    }
}
