//! The generic layout (config/README.md "Importing a product CSV"): a header row naming any of
//! `id`, `name`, `price`, `description`, `url`, `schedule`, `duration_hours` (also
//! `durationHours`), in any order; `name` and `price` required. The id is the `id` cell as
//! written (it must already be an id: it may be named in `tools.json`), else made from the name.

use super::*;

pub(super) fn read(table: &Table, out: &mut Output) {
    let name = table.required(&["name"], "name", out);
    let price = table.required(&["price"], "price", out);
    let (Some(name), Some(price)) = (name, price) else {
        return;
    };
    let id = table.column(&["id"]);
    let description = table.column(&["description"]);
    let url = table.column(&["url"]);
    let schedule = table.column(&["schedule"]);
    let duration = table.column(&["duration_hours", "durationhours"]);
    let optional = |row: &csv::StringRecord, column: Option<usize>| {
        column.map(|c| (cell(row, Some(c)).to_owned(), table.header(c).to_owned()))
    };
    for (line, row) in &table.rows {
        let written = cell(row, id);
        let (made, id_column) = if written.is_empty() {
            (
                crate::config::slug::slug(cell(row, Some(name)), MAX_ID_CHARS),
                name,
            )
        } else {
            (written.to_owned(), id.unwrap_or(name))
        };
        out.drafts.push(Draft {
            line: *line,
            id: made,
            id_column: table.header(id_column).to_owned(),
            name: cell(row, Some(name)).to_owned(),
            name_column: table.header(name).to_owned(),
            description: html::to_text(cell(row, description)),
            price: cell(row, Some(price)).to_owned(),
            price_column: table.header(price).to_owned(),
            url: optional(row, url),
            schedule: optional(row, schedule),
            duration: optional(row, duration),
        });
    }
}
