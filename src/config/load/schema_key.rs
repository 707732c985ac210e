//! The top-level `"$schema"` key editors write into a JSON file for completion (pointing at
//! `config/schema/*.schema.json`): accepted in every JSON config file and set aside before the
//! strict parse, which knows no such key. It must be a string; nothing else about it is read.
//!
//! The file is rebuilt from its top-level members as written, the `"$schema"` one left out, so
//! every other member keeps its exact text and a key written twice is still seen by the parse.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::ConfigIssue;

/// The key editors write.
pub(super) const SCHEMA_KEY: &str = "$schema";

/// `bytes` without its top-level `"$schema"` member; `bytes` itself when it has none or is not
/// a JSON object (the parse then reports what is wrong). A `"$schema"` that is not a string is
/// an issue of `file`, and is left out too so the rest of the file is still checked.
pub(super) fn without_schema_key<'a>(
    file: &str,
    bytes: &'a [u8],
    issues: &mut Vec<ConfigIssue>,
) -> Cow<'a, [u8]> {
    // Most files have none: no second parse for them.
    if !bytes
        .windows(SCHEMA_KEY.len() + 2)
        .any(|w| w == b"\"$schema\"")
    {
        return Cow::Borrowed(bytes);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Ok(members) = de.deserialize_map(Members) else {
        return Cow::Borrowed(bytes);
    };
    if de.end().is_err() || !members.iter().any(|(key, _)| key == SCHEMA_KEY) {
        return Cow::Borrowed(bytes);
    }
    let mut kept = Vec::with_capacity(bytes.len());
    kept.push(b'{');
    for (key, value) in &members {
        if key == SCHEMA_KEY {
            if !value.get().trim_start().starts_with('"') {
                issues.push(ConfigIssue::new(
                    file,
                    "$.$schema",
                    "must be a string: the address of the file's JSON Schema, for editors",
                ));
            }
            continue;
        }
        if kept.len() > 1 {
            kept.push(b',');
        }
        kept.extend_from_slice(serde_json::to_string(key).unwrap_or_default().as_bytes());
        kept.push(b':');
        kept.extend_from_slice(value.get().as_bytes());
    }
    kept.push(b'}');
    Cow::Owned(kept)
}

/// The members of a JSON object in the order written, duplicates kept, values as written.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
            members.push((key, value));
        }
        Ok(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(text: &str) -> (String, Vec<ConfigIssue>) {
        let mut issues = Vec::new();
        let kept = without_schema_key("rules.json", text.as_bytes(), &mut issues);
        (String::from_utf8(kept.into_owned()).unwrap(), issues)
    }

    #[test]
    fn a_top_level_schema_key_is_set_aside_and_every_other_member_kept_as_written() {
        let (kept, issues) = strip(
            r#"{"$schema": "./schema/rules.schema.json", "a": {"$schema": 1}, "b": [1, 2.50]}"#,
        );
        assert_eq!(kept, r#"{"a":{"$schema": 1},"b":[1, 2.50]}"#);
        assert!(issues.is_empty());
        // A key written twice stays twice, for the parse to refuse.
        let (kept, _) = strip(r#"{"a": 1, "$schema": "x", "a": 2}"#);
        assert_eq!(kept, r#"{"a":1,"a":2}"#);
    }

    #[test]
    fn a_schema_key_that_is_not_a_string_is_an_issue_and_a_file_without_one_is_untouched() {
        let (kept, issues) = strip(r#"{"$schema": 7, "a": 1}"#);
        assert_eq!(kept, r#"{"a":1}"#);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].path, "$.$schema");
        for untouched in [r#"{"a": "$schema"}"#, r#"[1]"#, r#"{"$schema": "x""#] {
            assert_eq!(strip(untouched).0, untouched);
        }
    }
}
