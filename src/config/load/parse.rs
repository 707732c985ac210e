//! Parsing one JSON file strictly while reporting every type error: a value of the wrong type
//! is reported and set aside (replaced by a stand-in, or removed) and the file parsed again, up
//! to `MAX_TYPE_ISSUES` times, so the rest of it is still validated.

use super::*;

/// At most this many type errors are reported per file (each one costs a parse).
pub(super) const MAX_TYPE_ISSUES: usize = 50;

/// One JSON file after parsing: the typed value when the syntax held, with the parts that
/// failed their types set aside (each reported), and the file as written.
pub(super) struct Parsed<T> {
    pub(super) value: Option<T>,
    /// JSON paths (as written in the file) of the parts removed to parse the rest.
    pub(super) set_aside: Vec<String>,
    /// The document as written, when its syntax held and its types did not.
    pub(super) raw: Option<serde_json::Value>,
}

impl<T> Parsed<T> {
    pub(super) fn failed() -> Self {
        Self {
            value: None,
            set_aside: Vec::new(),
            raw: None,
        }
    }

    /// The value, only when the whole file parsed.
    pub(super) fn complete(self) -> Option<T> {
        self.value
            .filter(|_| self.set_aside.is_empty() && self.raw.is_none())
    }

    /// For a catalog that failed its types: a stand-in carrying only the offering ids as
    /// written, for the other files' cross-checks.
    pub(super) fn offering_ids_stand_in(&self) -> Option<Catalog> {
        let offerings = self.raw.as_ref()?.get("offerings")?.as_array()?;
        let offering = |id: &str| crate::config::tenant::Offering {
            id: id.to_owned(),
            name: String::new(),
            description: String::new(),
            price: crate::config::tenant::Price {
                amount: 0,
                currency: String::new(),
            },
            duration_hours: None,
            schedule: None,
            url: None,
        };
        Some(Catalog {
            business_name: String::new(),
            currency: String::new(),
            offerings: offerings
                .iter()
                .filter_map(|o| o.get("id")?.as_str().map(offering))
                .collect(),
            faq: Vec::new(),
            payment_options: Vec::new(),
        })
    }
}

/// A step of a path into the document.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

/// Parses one JSON file strictly, pushing an issue (file, JSON path, rule in plain words) for
/// each problem. A syntax error ends the file's parse. A type error does not: the member that
/// failed is set aside and the rest parsed again, so that every type error in the file is
/// reported and what remains is still validated and cross-checked.
pub(super) fn parse_json<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
    issues: &mut Vec<ConfigIssue>,
) -> Parsed<T> {
    let bytes = without_bom(bytes);
    let bytes = &*super::schema_key::without_schema_key(file, bytes, issues);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        issues.push(ConfigIssue::new(
            file,
            "$",
            "is empty (it must hold a JSON object)",
        ));
        return Parsed::failed();
    }
    // The typed parse of the bytes themselves: the common case, and the only one that sees a
    // key written twice (a parsed document keeps one of them).
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let first = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(value) => match de.end() {
            Ok(()) => {
                return Parsed {
                    value: Some(value),
                    set_aside: Vec::new(),
                    raw: None,
                };
            }
            Err(err) => {
                issues.push(ConfigIssue::new(file, "$", plain_syntax(&err.to_string())));
                return Parsed::failed();
            }
        },
        Err(err) => err,
    };
    if first.inner().is_syntax() || first.inner().is_eof() {
        issues.push(ConfigIssue::new(
            file,
            "$",
            plain_syntax(&first.inner().to_string()),
        ));
        return Parsed::failed();
    }
    let steps: Vec<Step> = first.path().iter().filter_map(step).collect();
    push_type_issue(file, &steps, &first.inner().to_string(), issues);
    let before = issues.len();

    // A later syntax error, after the first type error, ends the parse here.
    let mut raw: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(raw) => raw,
        Err(err) => {
            issues.push(ConfigIssue::new(file, "$", plain_syntax(&err.to_string())));
            return Parsed::failed();
        }
    };
    let written = raw.clone();
    let mut set_aside = Vec::new();
    // Arrays (by path as written) and the indices, as written, removed from them.
    let mut removed: Vec<(Vec<Step>, usize)> = Vec::new();
    // Keys removed from objects (object path as written, key).
    let mut removed_keys: Vec<(Vec<Step>, String)> = Vec::new();
    // Paths (as the document now stands) where a stand-in value was written.
    let mut stood_in: Vec<Vec<Step>> = Vec::new();
    let mut pending = Some((steps, first.inner().to_string()));
    while issues.len() - before < MAX_TYPE_ISSUES {
        let (current, message) = match pending.take() {
            Some(first) => first,
            None => match serde_path_to_error::deserialize::<_, T>(&raw) {
                Ok(value) => {
                    return Parsed {
                        value: Some(value),
                        set_aside,
                        raw: Some(written),
                    };
                }
                Err(err) => {
                    let Some(steps) = err.path().iter().map(step).collect::<Option<Vec<_>>>()
                    else {
                        break;
                    };
                    let as_written = as_written(&steps, &removed);
                    let message = err.inner().to_string();
                    // "missing field" where this loop removed that very field, or inside an
                    // empty stand-in object it wrote: a consequence of setting aside, not a
                    // problem of the file.
                    let ours = missing_field(&message).is_some_and(|key| {
                        removed_keys.contains(&(as_written.clone(), key.to_owned()))
                            || stood_in.contains(&steps)
                    });
                    if !ours {
                        push_type_issue(file, &as_written, &message, issues);
                    }
                    (steps, message)
                }
            },
        };
        // A value of the wrong type is replaced by a stand-in of the right type, so that the
        // entry holding it keeps its place (other rules refer to entries: the funnel field, an
        // offering). Where no stand-in fits, or one already failed here, the member is removed.
        if !stood_in.contains(&current)
            && let Some(stand_in) = stand_in_for(&message)
            && let Some(node) = navigate(&mut raw, &current)
        {
            *node = stand_in;
            set_aside.push(json_path_of(&as_written(&current, &removed)));
            stood_in.push(current);
            continue;
        }
        // The first error's path is as written already (nothing was removed yet).
        let Some((last, parent)) = current.split_last() else {
            break;
        };
        let parent_as_written = as_written(parent, &removed);
        let Some(node) = navigate(&mut raw, parent) else {
            break;
        };
        match (last, node) {
            (Step::Key(key), serde_json::Value::Object(map)) => {
                map.remove(key);
                removed_keys.push((parent_as_written.clone(), key.clone()));
                let mut at = parent_as_written;
                at.push(Step::Key(key.clone()));
                set_aside.push(json_path_of(&at));
            }
            (Step::Index(index), serde_json::Value::Array(items)) if *index < items.len() => {
                items.remove(*index);
                let original = original_index(&removed, &parent_as_written, *index);
                removed.push((parent_as_written.clone(), original));
                let mut at = parent_as_written;
                at.push(Step::Index(original));
                set_aside.push(json_path_of(&at));
            }
            _ => break,
        }
    }
    Parsed {
        value: None,
        set_aside,
        raw: Some(written),
    }
}

/// A value of the type a type error expected (`invalid type: …, expected u32` → `0`), to stand
/// in for the wrong one; `None` for an enumeration or anything else without an obvious empty
/// value.
pub(super) fn stand_in_for(message: &str) -> Option<serde_json::Value> {
    use serde_json::{Value, json};
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let (_, expected) = rest.split_once(", expected ")?;
    let value = match expected.split_whitespace().next().unwrap_or_default() {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            json!(0)
        }
        "f32" | "f64" => json!(0.0),
        "struct" | "map" => Value::Object(serde_json::Map::new()),
        "sequence" => Value::Array(Vec::new()),
        "string" => json!(""),
        "boolean" | "bool" => json!(false),
        _ => match expected.split(" at line").next().unwrap_or_default() {
            "a string" => json!(""),
            "a sequence" => Value::Array(Vec::new()),
            "a map" => Value::Object(serde_json::Map::new()),
            "a boolean" => json!(false),
            _ => return None,
        },
    };
    Some(value)
}

pub(super) fn step(segment: &serde_path_to_error::Segment) -> Option<Step> {
    use serde_path_to_error::Segment;
    match segment {
        Segment::Seq { index } => Some(Step::Index(*index)),
        Segment::Map { key } => Some(Step::Key(key.clone())),
        Segment::Enum { .. } | Segment::Unknown => None,
    }
}

/// The index, as written, of the `current` index of the array at `array` (as written), given
/// the indices already removed from it.
pub(super) fn original_index(
    removed: &[(Vec<Step>, usize)],
    array: &[Step],
    current: usize,
) -> usize {
    let gone: Vec<usize> = removed
        .iter()
        .filter(|(at, _)| at == array)
        .map(|(_, i)| *i)
        .collect();
    let mut seen = 0;
    let mut index = 0;
    loop {
        if !gone.contains(&index) {
            if seen == current {
                return index;
            }
            seen += 1;
        }
        index += 1;
    }
}

/// A path in the document being pruned, as it was written in the file.
pub(super) fn as_written(steps: &[Step], removed: &[(Vec<Step>, usize)]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let next = match step {
            Step::Index(i) => Step::Index(original_index(removed, &out, *i)),
            key => key.clone(),
        };
        out.push(next);
    }
    out
}

pub(super) fn navigate<'v>(
    value: &'v mut serde_json::Value,
    steps: &[Step],
) -> Option<&'v mut serde_json::Value> {
    steps.iter().try_fold(value, |node, step| match step {
        Step::Key(key) => node.get_mut(key.as_str()),
        Step::Index(index) => node.get_mut(*index),
    })
}

/// The key a "missing field `x`" message names.
pub(super) fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// Pushes a type error at `steps`. An unknown key is reported at the object that holds it
/// (`$.flows[0]`), the key itself being named in the rule: the path then points at something
/// that exists.
pub(super) fn push_type_issue(
    file: &str,
    steps: &[Step],
    message: &str,
    issues: &mut Vec<ConfigIssue>,
) {
    let mut at = steps;
    if let Some((Step::Key(key), parent)) = steps.split_last()
        && message.starts_with(&format!("unknown field `{key}`"))
    {
        at = parent;
    }
    let mut rule = plain_type(&scrub(message));
    if let [.., Step::Key(price), Step::Key(amount)] = at
        && price == "price"
        && amount == "amount"
    {
        rule.push_str(" (prices are in minor units, cents: 45000 is 450.00)");
    }
    let issue = ConfigIssue::new(file, json_path_of(at), rule);
    if !issues.contains(&issue) {
        issues.push(issue);
    }
}

pub(super) fn json_path_of(steps: &[Step]) -> String {
    let segments: Vec<serde_path_to_error::Segment> = steps
        .iter()
        .map(|s| match s {
            Step::Key(key) => serde_path_to_error::Segment::Map { key: key.clone() },
            Step::Index(index) => serde_path_to_error::Segment::Seq { index: *index },
        })
        .collect();
    json_path(&segments.iter().collect::<Vec<_>>())
}
