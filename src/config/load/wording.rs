//! serde's errors in plain words (`must be a whole number, 0 or more, not a string`), with the
//! JSON path, and scrubbed of any value quoted from the file (C5, C9).

use super::*;

/// A JSON syntax error in plain words, keeping serde's line and column.
pub(super) fn plain_syntax(message: &str) -> String {
    const PLAIN: &[(&str, &str)] = &[
        (
            "EOF while parsing a value",
            "the file ends where a value was expected",
        ),
        (
            "EOF while parsing an object",
            "the file ends before an object is closed with }",
        ),
        (
            "EOF while parsing a list",
            "the file ends before a list is closed with ]",
        ),
        (
            "EOF while parsing a string",
            "the file ends inside a string",
        ),
        (
            "trailing characters",
            "has trailing content after the JSON document",
        ),
        ("trailing comma", "a comma before a closing bracket"),
        ("expected value", "a value was expected"),
        (
            "key must be a string",
            "a key must be a string in double quotes",
        ),
        ("expected `:`", "a : was expected after a key"),
        ("expected `,` or `}`", "a , or } was expected"),
        ("expected `,` or `]`", "a , or ] was expected"),
        (
            "control character (\\u0000-\\u001F) found while parsing a string",
            "a line break or control character inside a string (write it as \\n)",
        ),
    ];
    let mut text = message.to_owned();
    for (from, to) in PLAIN {
        if let Some(rest) = text.strip_prefix(from) {
            text = format!("{to}{rest}");
            break;
        }
    }
    format!("is not valid JSON: {text}")
}

/// What a type is, in plain words, from serde's name for it.
pub(super) fn plain_kind(kind: &str) -> String {
    const OBJECT: &str = "an object ({…})";
    const LIST: &str = "a list ([…])";
    const STRING: &str = "a string (text in double quotes)";
    let kind = kind.trim();
    let plain = match kind.split_whitespace().next().unwrap_or_default() {
        // The key's own range, if narrower, is checked once the type is right.
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more",
        "i8" | "i16" | "i32" | "i64" | "isize" | "integer" => "a whole number",
        "f32" | "f64" => "a number",
        "floating" => "a decimal number",
        "struct" | "map" => OBJECT,
        "sequence" => LIST,
        "boolean" | "bool" => "true or false",
        "null" | "unit" => "null",
        "string" => STRING,
        _ => match kind {
            "a string" => STRING,
            "a map" => OBJECT,
            "a sequence" => LIST,
            "a boolean" => "true or false",
            other => other,
        },
    };
    plain.to_owned()
}

/// A type error in plain words (after `scrub`: no value from the file is in it).
pub(super) fn plain_type(message: &str) -> String {
    static AT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r" at line \d+ column \d+$").expect("static regex compiles"));
    // The path names the place; the typed parse of a parsed document has no line anyway.
    let message = AT.replace(message, "");
    let message = message.as_ref();
    if let Some(rest) = message.strip_prefix("invalid type: ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        let got = plain_kind(got);
        let got = got.split(" (").next().unwrap_or_default();
        return format!("must be {}, not {got}", plain_kind(expected));
    }
    if let Some(rest) = message.strip_prefix("invalid value: ")
        && let Some((_, expected)) = rest.split_once(", expected ")
    {
        return format!("must be {}", plain_kind(expected));
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((_, expected)) = rest.split_once(", expected ")
    {
        if expected.starts_with("struct ") {
            return "must be an object ({…}), not a list".to_owned();
        }
        return format!("has the wrong number of entries (expected {expected})");
    }
    if let Some(key) = missing_field(message) {
        return format!("the required key `{key}` is missing");
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((key, allowed)) = rest.split_once('`')
    {
        // 042: a key from before the sales layer sold offerings; the upgrade renames it.
        if let Some((_, new)) = crate::config::upgrade::OLD_KEYS
            .iter()
            .find(|(old, _)| *old == key)
        {
            return format!(
                "`{key}` is the old name of `{new}`: run `manychat-agent config upgrade` to rename it in place"
            );
        }
        let allowed = allowed.trim_start_matches(", ");
        return match allowed.strip_prefix("expected ") {
            Some(list) => format!(
                "unknown key `{key}` (allowed here: {})",
                list.trim_start_matches("one of ").replace('`', "")
            ),
            None => format!("unknown key `{key}` (no keys are allowed here)"),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant, expected ") {
        return match rest.strip_prefix("one of ") {
            Some(list) => format!("must be one of: {}", list.replace('`', "")),
            None => format!("must be {}", rest.replace('`', "")),
        };
    }
    if let Some(rest) = message.strip_prefix("duplicate field `") {
        let key = rest.split('`').next().unwrap_or_default();
        return format!("the key `{key}` is written twice");
    }
    message.to_owned()
}

/// `serde_path_to_error`'s path as a JSON path: `$`, `$.flows[2].flowNs`.
pub(super) fn json_path(segments: &[&serde_path_to_error::Segment]) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::from("$");
    for segment in segments {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    out.push('.');
                    out.push_str(key);
                } else {
                    out.push_str(&format!("[{key:?}]"));
                }
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

/// Removes the values serde quotes in its messages (`invalid type: string "…"`,
/// `unknown variant `…``, numbers), keeping the kind, the expectation, key names and the
/// line/column. A config value may be customer copy or a price (C1, C5).
pub(super) fn scrub(message: &str) -> String {
    static QUOTED_STRING: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"string "(?:[^"\\]|\\.)*""#).expect("static regex compiles"));
    static VARIANT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"unknown variant `.*?`(, expected|$| at line)").expect("static regex compiles")
    });
    static SCALAR: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(integer|floating point|character) `[^`]*`").expect("static regex compiles")
    });
    let out = QUOTED_STRING.replace_all(message, "a string");
    let out = VARIANT.replace_all(&out, "unknown variant$1");
    let out = SCALAR.replace_all(&out, "$1");
    out.into_owned()
}
