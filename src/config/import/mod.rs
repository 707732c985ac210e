//! `catalog import`: a shop's product CSV export turned into `catalog.json` offerings
//! (config/README.md "Importing a product CSV").
//!
//! Rules:
//! - The file is UTF-8 CSV (a byte order mark is fine), at most [`MAX_CSV_BYTES`], read by the
//!   `csv` crate (quoted multi-line fields); a header row with no comma and a `;` is read as
//!   `;`-separated (a spreadsheet's export in some locales). UTF-16, NUL bytes or invalid UTF-8
//!   are refused whole, with the line.
//! - The layout is Shopify's, WooCommerce's or the generic one, given or recognised from the
//!   header row ([`Format::detect`]); headers match ignoring case and surrounding spaces.
//! - All or nothing: every row is checked, and any refused row refuses the import; each refusal
//!   names its line (where its record starts in the file), its column and the rule, never the
//!   cell's text (C5). Rows the layout says are not for sale (drafts, unpublished, grouped
//!   products) are skipped and counted, not refused.
//! - Prices are plain decimals converted to the catalog currency's minor units
//!   ([`crate::config::currency::parse_amount`]): never rounded.
//! - Ids are made from the handle, SKU or name ([`crate::config::slug`]) and must be unique
//!   within the file.
//! - Descriptions are HTML stripped to text ([`html`]), the name when the shop has none, and
//!   cut at a word to [`crate::config::MAX_DESCRIPTION_CHARS`] (counted in the notes).
//!
//! Pure: bytes in, offerings or every refusal out. Merging into `catalog.json`, checking the
//! result with the loader and writing it is `cli`'s.

use std::collections::HashMap;
use std::fmt;

use super::tenant::{Offering, Price};
use super::validate::{MAX_DESCRIPTION_CHARS, MAX_ID_CHARS, MAX_NAME_CHARS, is_valid_id};

mod generic;
pub mod html;
mod shopify;
mod woocommerce;

/// The largest CSV read: a shop's export with long HTML descriptions is larger than the
/// catalog it makes.
pub const MAX_CSV_BYTES: u64 = 64 * 1024 * 1024;

/// The CSV layouts `catalog import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Shopify,
    WooCommerce,
    Generic,
}

impl Format {
    /// The layout a header row (lowercased, trimmed) is in: Shopify's has a handle column,
    /// WooCommerce's a `Regular price`, the generic one `name` and `price`.
    pub fn detect(keys: &[String]) -> Option<Self> {
        let has = |k: &str| keys.iter().any(|x| x == k);
        if (has("handle") || has("url handle")) && has("title") {
            Some(Self::Shopify)
        } else if has("regular price") {
            Some(Self::WooCommerce)
        } else if has("name") && has("price") {
            Some(Self::Generic)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Shopify => "shopify",
            Self::WooCommerce => "woocommerce",
            Self::Generic => "generic",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "shopify" => Ok(Self::Shopify),
            "woocommerce" => Ok(Self::WooCommerce),
            "generic" => Ok(Self::Generic),
            _ => Err("must be shopify, woocommerce or generic".to_owned()),
        }
    }
}

/// One refusal: where in the CSV and which rule. Never the cell's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowIssue {
    /// The line the row starts on (the header is line 1); `None` for the file as a whole.
    pub line: Option<u64>,
    /// The column as its header is written.
    pub column: Option<String>,
    pub rule: String,
}

impl RowIssue {
    fn file(rule: impl Into<String>) -> Self {
        Self {
            line: None,
            column: None,
            rule: rule.into(),
        }
    }

    fn at(line: u64, column: &str, rule: impl Into<String>) -> Self {
        Self {
            line: Some(line),
            column: Some(column.to_owned()),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for RowIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let column = self
            .column
            .as_deref()
            .map(|c| crate::config::printable(c).into_owned());
        match (self.line, column) {
            (Some(line), Some(column)) => {
                write!(f, "line {line}, column `{column}`: {}", self.rule)
            }
            (Some(line), None) => write!(f, "line {line}: {}", self.rule),
            _ => f.write_str(&self.rule),
        }
    }
}

/// What an import made: the offerings in file order, with the line each came from, and what it
/// skipped or changed on the way (for the operator, never refusals).
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub format: Format,
    pub offerings: Vec<(u64, Offering)>,
    pub notes: Vec<String>,
}

/// Reads `bytes` as a product CSV in `format` (recognised from the header when `None`), priced
/// in `currency`. Every refusal at once, or the offerings.
pub fn import_csv(
    bytes: &[u8],
    format: Option<Format>,
    currency: &str,
) -> Result<Imported, Vec<RowIssue>> {
    let table = Table::read(bytes).map_err(|issue| vec![issue])?;
    let format = match format.or_else(|| Format::detect(&table.keys)) {
        Some(format) => format,
        None => {
            return Err(vec![RowIssue {
                line: Some(1),
                column: None,
                rule: "the header row matches no layout: Shopify's has Handle (or URL handle) and \
                       Title, WooCommerce's Regular price, the generic one name and price (pass \
                       --format to say which)"
                    .to_owned(),
            }]);
        }
    };
    let mut out = Output::default();
    match format {
        Format::Shopify => shopify::read(&table, &mut out),
        Format::WooCommerce => woocommerce::read(&table, &mut out),
        Format::Generic => generic::read(&table, &mut out),
    }
    let mut offerings = Vec::new();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut shortened = Vec::new();
    let mut named = Vec::new();
    for draft in std::mem::take(&mut out.drafts) {
        let line = draft.line;
        let id_column = draft.id_column.clone();
        if let Some(offering) = draft.finish(currency, &mut out, &mut shortened, &mut named) {
            match seen.get(&offering.id) {
                Some(first) => out.issues.push(RowIssue::at(
                    line,
                    &id_column,
                    format!(
                        "makes the id `{}` that line {first} already made: ids must be unique",
                        offering.id
                    ),
                )),
                None => {
                    seen.insert(offering.id.clone(), line);
                    offerings.push((line, offering));
                }
            }
        }
    }
    if !shortened.is_empty() {
        out.notes.push(format!(
            "{} descriptions were cut to {MAX_DESCRIPTION_CHARS} characters, at a word (lines {})",
            shortened.len(),
            lines(&shortened)
        ));
    }
    if !named.is_empty() {
        out.notes.push(format!(
            "{} products have no description: their name stands in (lines {})",
            named.len(),
            lines(&named)
        ));
    }
    if offerings.is_empty() && out.issues.is_empty() {
        out.issues.push(RowIssue::file(
            "holds no product to import (only a header, or only skipped rows)",
        ));
    }
    if out.issues.is_empty() {
        Ok(Imported {
            format,
            offerings,
            notes: out.notes,
        })
    } else {
        out.issues.sort_by_key(|i| i.line);
        Err(out.issues)
    }
}

/// Up to ten line numbers, then how many more.
pub(super) fn lines(all: &[u64]) -> String {
    let mut shown: Vec<String> = all.iter().take(10).map(u64::to_string).collect();
    if all.len() > 10 {
        shown.push(format!("and {} more", all.len() - 10));
    }
    shown.join(", ")
}

/// What a layout's reader produces.
#[derive(Default)]
pub(super) struct Output {
    pub(super) drafts: Vec<Draft>,
    pub(super) issues: Vec<RowIssue>,
    pub(super) notes: Vec<String>,
}

/// One offering as a layout read it, before its price and texts are checked.
pub(super) struct Draft {
    pub(super) line: u64,
    /// The id, already made by the layout's rule; empty when its source had no letter or digit.
    pub(super) id: String,
    pub(super) id_column: String,
    pub(super) name: String,
    pub(super) name_column: String,
    /// Plain text (HTML already stripped).
    pub(super) description: String,
    pub(super) price: String,
    pub(super) price_column: String,
    /// Optional cells, each with its column: an `https://` page, a schedule, hours.
    pub(super) url: Option<(String, String)>,
    pub(super) schedule: Option<(String, String)>,
    pub(super) duration: Option<(String, String)>,
}

/// The columns a shop layout read an offering from, named in the offering's refusals.
pub(super) struct ShopColumns {
    /// The column the id was made from.
    pub(super) id: usize,
    pub(super) name: usize,
    pub(super) price: usize,
}

impl Draft {
    /// A shop export's row (`line`, `row`) as a draft: the id, name and description its layout
    /// made of it, and the price as the row's price cell holds it. A shop export has no url,
    /// schedule or duration.
    pub(super) fn from_shop_row(
        table: &Table,
        columns: ShopColumns,
        (line, row): (u64, &csv::StringRecord),
        id: String,
        name: String,
        description: String,
    ) -> Self {
        Self {
            line,
            id,
            id_column: table.header(columns.id).to_owned(),
            name,
            name_column: table.header(columns.name).to_owned(),
            description,
            price: cell(row, Some(columns.price)).to_owned(),
            price_column: table.header(columns.price).to_owned(),
            url: None,
            schedule: None,
            duration: None,
        }
    }

    /// The offering, or its refusals pushed to `out`.
    fn finish(
        self,
        currency: &str,
        out: &mut Output,
        shortened: &mut Vec<u64>,
        named: &mut Vec<u64>,
    ) -> Option<Offering> {
        let before = out.issues.len();
        let line = self.line;
        let mut refuse = |column: &str, rule: String| {
            out.issues.push(RowIssue::at(line, column, rule));
        };
        if self.id.is_empty() {
            refuse(
                &self.id_column,
                "gives no id: it is empty or has no Latin letter or digit".to_owned(),
            );
        } else if !is_valid_id(&self.id) || self.id.chars().count() > MAX_ID_CHARS {
            refuse(
                &self.id_column,
                format!(
                    "must be an id: lowercase letters, digits, _ and -, at most {MAX_ID_CHARS} \
                     characters"
                ),
            );
        }
        let name = self.name.trim().to_owned();
        if name.is_empty() {
            refuse(&self.name_column, "must not be empty".to_owned());
        } else if name.chars().count() > MAX_NAME_CHARS {
            refuse(
                &self.name_column,
                format!("must be at most {MAX_NAME_CHARS} characters"),
            );
        }
        let amount = if self.price.trim().is_empty() {
            refuse(&self.price_column, "must hold the price".to_owned());
            None
        } else {
            super::currency::parse_amount(&self.price, currency)
                .map_err(|e| refuse(&self.price_column, e.to_string()))
                .ok()
        };
        let mut description = self.description.trim().to_owned();
        if description.is_empty() {
            named.push(line);
            description = name.clone();
        }
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            shortened.push(line);
            description = cut_at_word(&description, MAX_DESCRIPTION_CHARS);
        }
        let url = self
            .url
            .filter(|(v, _)| !v.trim().is_empty())
            .and_then(|(v, column)| {
                let v = v.trim().to_owned();
                let https = reqwest::Url::parse(&v)
                    .is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some());
                if https {
                    Some(v)
                } else {
                    refuse(&column, "must be an https:// URL".to_owned());
                    None
                }
            });
        let schedule = self
            .schedule
            .filter(|(v, _)| !v.trim().is_empty())
            .and_then(|(v, column)| {
                if v.trim().chars().count() > MAX_DESCRIPTION_CHARS {
                    refuse(
                        &column,
                        format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
                    );
                    None
                } else {
                    Some(v.trim().to_owned())
                }
            });
        let duration_hours = self
            .duration
            .filter(|(v, _)| !v.trim().is_empty())
            .and_then(|(v, column)| match v.trim().parse::<f64>() {
                Ok(h) if h.is_finite() && h > 0.0 => Some(h),
                _ => {
                    refuse(
                        &column,
                        "must be a number of hours greater than zero".to_owned(),
                    );
                    None
                }
            });
        if out.issues.len() > before {
            return None;
        }
        Some(Offering {
            id: self.id,
            name,
            description,
            price: Price {
                amount: amount?,
                currency: currency.to_owned(),
            },
            duration_hours,
            schedule,
            url,
        })
    }
}

/// `text` cut to at most `max` characters at the last space before the bound, with `…`.
fn cut_at_word(text: &str, max: usize) -> String {
    let head: String = text.chars().take(max - 1).collect();
    let cut = head
        .rfind(char::is_whitespace)
        .filter(|at| *at > head.len() / 2)
        .map_or(head.as_str(), |at| &head[..at]);
    format!("{}…", cut.trim_end())
}

/// The CSV as read: its header (as written and as matched) and its rows with their lines.
pub(super) struct Table {
    pub(super) written: Vec<String>,
    pub(super) keys: Vec<String>,
    pub(super) rows: Vec<(u64, csv::StringRecord)>,
}

impl Table {
    /// Reads the whole file, or the one reason it cannot be read.
    fn read(bytes: &[u8]) -> Result<Self, RowIssue> {
        if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
            return Err(RowIssue::file(
                "is UTF-16 text: save it as CSV UTF-8 (a spreadsheet's \"CSV UTF-8\" export)",
            ));
        }
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let line_at =
            |offset: usize| bytes[..offset].iter().filter(|b| **b == b'\n').count() as u64 + 1;
        if let Some(at) = bytes.iter().position(|b| *b == 0) {
            return Err(RowIssue {
                line: Some(line_at(at)),
                column: None,
                rule: "is binary (it holds NUL bytes), not a CSV file".to_owned(),
            });
        }
        if let Err(e) = std::str::from_utf8(bytes) {
            return Err(RowIssue {
                line: Some(line_at(e.valid_up_to())),
                column: None,
                rule: "is not valid UTF-8: save it as CSV UTF-8 (a spreadsheet's \"CSV UTF-8\" \
                       export)"
                    .to_owned(),
            });
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(RowIssue::file("is empty"));
        }
        let first_line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        let delimiter = if !first_line.contains(&b',') && first_line.contains(&b';') {
            b';'
        } else {
            b','
        };
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .flexible(true)
            .has_headers(true)
            .from_reader(bytes);
        let written: Vec<String> = reader
            .headers()
            .map_err(|e| csv_issue(&e))?
            .iter()
            .map(|h| h.trim().to_owned())
            .collect();
        let keys: Vec<String> = written.iter().map(|h| h.to_lowercase()).collect();
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| csv_issue(&e))?;
            let line = record.position().map_or(0, csv::Position::line);
            if record.len() > written.len() {
                return Err(RowIssue {
                    line: Some(line),
                    column: None,
                    rule: format!(
                        "has {} fields where the header row has {} (a quote is likely missing)",
                        record.len(),
                        written.len()
                    ),
                });
            }
            if record.iter().all(|cell| cell.trim().is_empty()) {
                continue;
            }
            rows.push((line, record));
        }
        Ok(Self {
            written,
            keys,
            rows,
        })
    }

    /// The index of the first of `names` (lowercase) the header has.
    pub(super) fn column(&self, names: &[&str]) -> Option<usize> {
        names
            .iter()
            .find_map(|name| self.keys.iter().position(|k| k == name))
    }

    /// The required column of `names`, or its refusal naming the first of `shown`.
    pub(super) fn required(&self, names: &[&str], shown: &str, out: &mut Output) -> Option<usize> {
        let found = self.column(names);
        if found.is_none() {
            out.issues.push(RowIssue {
                line: Some(1),
                column: None,
                rule: format!("the header row has no {shown} column, which this layout needs"),
            });
        }
        found
    }

    /// The header of column `i` as written.
    pub(super) fn header(&self, i: usize) -> &str {
        &self.written[i]
    }
}

/// A cell, empty when the row is shorter than the header or the column absent.
pub(super) fn cell(record: &csv::StringRecord, column: Option<usize>) -> &str {
    column.and_then(|i| record.get(i)).unwrap_or("").trim()
}

/// A reader's error as a refusal: its line, never its text.
fn csv_issue(error: &csv::Error) -> RowIssue {
    RowIssue {
        line: error.position().map(csv::Position::line),
        column: None,
        rule: "cannot be read as CSV".to_owned(),
    }
}

#[cfg(test)]
mod tests;
