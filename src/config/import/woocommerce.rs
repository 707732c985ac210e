//! WooCommerce's product export (its built-in CSV exporter's English headers): `ID`, `Type`,
//! `SKU`, `Name`, `Published`, `Short description`, `Description`, `Regular price`,
//! `Sale price`, `Parent`, `Attribute 1 value(s)`….
//!
//! A simple or external product is one offering; a variable product makes none of its own, each
//! of its variations one (named by its own `Name`, else the parent's with the attribute values;
//! described by its own text, else the parent's). A grouped product has no price of its own and
//! is skipped. `Published` other than `1` (0 private, -1 draft) is skipped. The price is the
//! `Regular price`: a `Sale price` is a discount with dates `catalog.json` cannot hold, so it is
//! not imported (counted in the notes). The id is the SKU, else `wc-<ID>`, else the name.

use super::*;

pub(super) fn read(table: &Table, out: &mut Output) {
    let name = table.required(&["name"], "Name", out);
    let price = table.required(&["regular price"], "Regular price", out);
    let (Some(name), Some(price)) = (name, price) else {
        return;
    };
    let id = table.column(&["id"]);
    let kind = table.column(&["type"]);
    let sku = table.column(&["sku"]);
    let published = table.column(&["published"]);
    let short = table.column(&["short description"]);
    let long = table.column(&["description"]);
    let sale = table.column(&["sale price"]);
    let parent = table.column(&["parent"]);
    let attributes: Vec<Option<usize>> = (1..=3)
        .map(|n| table.column(&[&format!("attribute {n} value(s)")]))
        .collect();

    let description = |row: &csv::StringRecord| {
        let short = html::to_text(cell(row, short));
        if short.is_empty() {
            html::to_text(cell(row, long))
        } else {
            short
        }
    };
    // Variable products by the two ways a variation names its parent: `id:<ID>` and the SKU.
    let mut parents: HashMap<String, &csv::StringRecord> = HashMap::new();
    for (_, row) in &table.rows {
        if cell(row, kind).to_ascii_lowercase().contains("variable") {
            if !cell(row, id).is_empty() {
                parents.insert(format!("id:{}", cell(row, id)), row);
            }
            if !cell(row, sku).is_empty() {
                parents.insert(cell(row, sku).to_owned(), row);
            }
        }
    }

    let mut skipped = Vec::new();
    let mut grouped = Vec::new();
    let mut on_sale = Vec::new();
    for (line, row) in &table.rows {
        let kind_of = cell(row, kind).to_ascii_lowercase();
        if kind_of.contains("variable") {
            continue;
        }
        if kind_of.contains("grouped") {
            grouped.push(*line);
            continue;
        }
        let published_as = cell(row, published);
        if !published_as.is_empty() && published_as != "1" {
            skipped.push(*line);
            continue;
        }
        let parent_row = parents.get(cell(row, parent)).copied();
        let mut offering_name = cell(row, Some(name)).to_owned();
        if offering_name.is_empty()
            && let Some(p) = parent_row
        {
            let values: Vec<&str> = attributes
                .iter()
                .map(|a| cell(row, *a))
                .filter(|v| !v.is_empty())
                .collect();
            offering_name = format!("{} ({})", cell(p, Some(name)), values.join(" / "));
        }
        let mut text = description(row);
        if text.is_empty()
            && let Some(p) = parent_row
        {
            text = description(p);
        }
        let (made, id_column) = if !cell(row, sku).is_empty() {
            (cell(row, sku), sku)
        } else if !cell(row, id).is_empty() {
            (cell(row, id), id)
        } else {
            (offering_name.as_str(), Some(name))
        };
        let made = if id_column == id && id.is_some() {
            format!("wc-{made}")
        } else {
            made.to_owned()
        };
        if !cell(row, sale).is_empty() {
            on_sale.push(*line);
        }
        out.drafts.push(Draft::from_shop_row(
            table,
            ShopColumns {
                id: id_column.unwrap_or(name),
                name,
                price,
            },
            (*line, row),
            crate::config::slug::slug(&made, MAX_ID_CHARS),
            offering_name,
            text,
        ));
    }
    if !skipped.is_empty() {
        out.notes.push(format!(
            "skipped {} products not published (Published 0 or -1): lines {}",
            skipped.len(),
            lines(&skipped)
        ));
    }
    if !grouped.is_empty() {
        out.notes.push(format!(
            "skipped {} grouped products (no price of their own; their products are imported \
             on their own rows): lines {}",
            grouped.len(),
            lines(&grouped)
        ));
    }
    if !on_sale.is_empty() {
        out.notes.push(format!(
            "{} products have a Sale price: their Regular price was imported (a sale is a \
             discount with dates catalog.json does not hold; change the price by hand while it \
             runs): lines {}",
            on_sale.len(),
            lines(&on_sale)
        ));
    }
}
