//! A document's text split into passages: Markdown by heading, plain text as one section, each
//! section cut further at paragraph boundaries when it is larger than [`MAX_PASSAGE_CHARS`].
//!
//! Rules (config/README.md "`knowledge/`"):
//! - A heading is an ATX line (`#` to `######` then a space, up to three spaces before it; a
//!   closing run of `#` dropped) or a setext one (a one-line paragraph underlined with `===`,
//!   level 1, or `---`, level 2). Lines inside a fenced code block (```` ``` ```` or `~~~`) are
//!   text, never headings.
//! - A passage's heading is its path of headings joined by ` > ` (`Returns > Refunds`); the text
//!   before the first heading has an empty heading. A heading with no text under it makes no
//!   passage of its own (it lives on in its children's paths).
//! - A section larger than [`MAX_PASSAGE_CHARS`] is cut between paragraphs (blank lines), a
//!   paragraph larger than that between lines, a line between words, and a word longer than
//!   that (no spaces: some scripts) every [`MAX_PASSAGE_CHARS`] characters. Each piece keeps the
//!   section's heading. Nothing is dropped and nothing is rewritten but the whitespace at a cut.
//!
//! Pure: text in, `(heading, text)` pairs out; the caller numbers them.

/// The largest passage, in characters (about 500 tokens): large enough for a policy's section
/// whole, small enough that a turn can be given several.
pub const MAX_PASSAGE_CHARS: usize = 2000;

/// The passages of a Markdown document, in document order: `(heading path, text)`.
pub fn split_markdown(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // The open headings, outermost first: (level, text).
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut body: Vec<&str> = Vec::new();
    // The open fence's character and length.
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        if let Some(marker) = fence_marker(line) {
            match fence {
                None => fence = Some(marker),
                Some((c, n)) if marker.0 == c && marker.1 >= n && closes(line) => fence = None,
                Some(_) => {}
            }
            body.push(line);
            continue;
        }
        if fence.is_some() {
            body.push(line);
            continue;
        }
        let heading = atx_heading(line).or_else(|| {
            let level = setext_level(line)?;
            let title = setext_title(&body)?;
            body.pop();
            Some((level, title.trim().to_owned()))
        });
        match heading {
            Some((level, title)) => {
                flush(&mut out, &path, &body);
                body.clear();
                path.retain(|(open, _)| *open < level);
                path.push((level, title));
            }
            None => body.push(line),
        }
    }
    flush(&mut out, &path, &body);
    out
}

/// The passages of a plain-text document: its whole text under an empty heading, cut as a
/// section is.
pub fn split_plain(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    flush(&mut out, &[], &text.lines().collect::<Vec<_>>());
    out
}

/// Emits the section `body` under `path`, cut to the bound; nothing when it holds no text.
fn flush(out: &mut Vec<(String, String)>, path: &[(usize, String)], body: &[&str]) {
    // Whitespace-only lines become blank, so paragraphs split on "\n\n" alone.
    let text: Vec<&str> = body
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                ""
            } else {
                l.trim_end()
            }
        })
        .collect();
    let text = text.join("\n");
    let text = text.trim_matches('\n');
    if text.trim().is_empty() {
        return;
    }
    let heading = path
        .iter()
        .map(|(_, t)| t.as_str())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" > ");
    for piece in bounded(text, MAX_PASSAGE_CHARS, &["\n\n", "\n", " "]) {
        out.push((heading.clone(), piece));
    }
}

/// `text` cut into pieces of at most `max` characters at the first of `separators` that does,
/// pieces joined back greedily with the separator they were cut at.
fn bounded(text: &str, max: usize, separators: &[&str]) -> Vec<String> {
    let text = text.trim();
    let chars = text.chars().count();
    if chars <= max {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    let Some((separator, finer)) = separators.split_first() else {
        let all: Vec<char> = text.chars().collect();
        return all.chunks(max).map(|c| c.iter().collect()).collect();
    };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0;
    for part in text.split(separator) {
        for piece in bounded(part, max, finer) {
            let piece_chars = piece.chars().count();
            if current.is_empty() {
                current = piece;
                current_chars = piece_chars;
            } else if current_chars + separator.len() + piece_chars <= max {
                current.push_str(separator);
                current.push_str(&piece);
                current_chars += separator.len() + piece_chars;
            } else {
                out.push(std::mem::replace(&mut current, piece));
                current_chars = piece_chars;
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Up to three spaces of indent, then the rest of the line.
fn unindented(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches(' ');
    (line.len() - rest.len() <= 3).then_some(rest)
}

/// An ATX heading's level and text.
fn atx_heading(line: &str) -> Option<(usize, String)> {
    let rest = unindented(line)?;
    let level = rest.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let mut title = after.trim();
    // A closing run of `#`, when a space separates it (or it is the whole title).
    let without = title.trim_end_matches('#');
    if without.is_empty() || without.ends_with([' ', '\t']) {
        title = without.trim_end();
    }
    Some((level, title.to_owned()))
}

/// A setext underline's level: `===` is 1, `---` is 2.
fn setext_level(line: &str) -> Option<usize> {
    let rest = unindented(line)?.trim_end();
    let first = rest.chars().next()?;
    let level = match first {
        '=' => 1,
        '-' => 2,
        _ => return None,
    };
    rest.chars().all(|c| c == first).then_some(level)
}

/// The line a setext underline makes a heading: the last line of the body when it is a
/// one-line paragraph of plain text (not a list item, a quote or a table row).
fn setext_title<'a>(body: &[&'a str]) -> Option<&'a str> {
    let (last, before) = body.split_last()?;
    let text = unindented(last)?;
    let standalone = before.last().is_none_or(|l| l.trim().is_empty());
    let plain = !text.trim().is_empty()
        && !text.starts_with(['-', '*', '+', '>', '|', '#'])
        && !text
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    (standalone && plain).then_some(last)
}

/// A fence line's character and run length.
fn fence_marker(line: &str) -> Option<(char, usize)> {
    let rest = unindented(line)?;
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = rest.chars().take_while(|x| *x == c).count();
    (run >= 3).then_some((c, run))
}

/// A closing fence holds nothing after its run.
fn closes(line: &str) -> bool {
    let rest = line.trim();
    rest.chars().all(|c| c == '`' || c == '~')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headings(passages: &[(String, String)]) -> Vec<&str> {
        passages.iter().map(|(h, _)| h.as_str()).collect()
    }

    #[test]
    fn knowledge_markdown_is_split_by_heading_with_the_heading_path_joined() {
        let doc = "Welcome text.\n\n# Policies\n\n## Returns ##\nWithin 30 days.\n\n\
                   ### Refunds\nTo the card.\n\n## Delivery\nTwo days.\n# Care\nWash by hand.\n";
        let passages = split_markdown(doc);
        assert_eq!(
            headings(&passages),
            [
                "",
                "Policies > Returns",
                "Policies > Returns > Refunds",
                "Policies > Delivery",
                "Care"
            ]
        );
        assert_eq!(passages[0].1, "Welcome text.");
        assert_eq!(passages[2].1, "To the card.");
    }

    #[test]
    fn knowledge_setext_headings_count_and_fenced_hashes_do_not() {
        let doc = "Opening hours\n=============\nMon to Fri.\n\nHolidays\n--------\nClosed.\n\n\
                   ```\n# not a heading\n```\n#hashtag is text\n";
        let passages = split_markdown(doc);
        assert_eq!(
            headings(&passages),
            ["Opening hours", "Opening hours > Holidays"]
        );
        assert!(passages[1].1.contains("# not a heading"), "{passages:?}");
        assert!(passages[1].1.ends_with("#hashtag is text"), "{passages:?}");
    }

    #[test]
    fn knowledge_a_section_over_the_bound_is_cut_between_paragraphs_keeping_its_heading() {
        let paragraph = "word ".repeat(300); // 1,500 characters
        let doc = format!(
            "# Long\n\n{paragraph}\n\n{paragraph}\n\n{}",
            "x".repeat(4500)
        );
        let passages = split_markdown(&doc);
        assert!(passages.len() >= 4, "{}", passages.len());
        for (heading, text) in &passages {
            assert_eq!(heading, "Long");
            assert!(text.chars().count() <= MAX_PASSAGE_CHARS);
        }
        let total: usize = passages
            .iter()
            .map(|(_, t)| t.matches("word").count())
            .sum();
        assert_eq!(total, 600, "nothing is dropped");
        let xs: usize = passages.iter().map(|(_, t)| t.matches('x').count()).sum();
        assert_eq!(xs, 4500);
    }

    #[test]
    fn knowledge_plain_text_is_one_passage_with_an_empty_heading() {
        assert_eq!(
            split_plain("# not a heading in a .txt\nline two\n"),
            [(
                String::new(),
                "# not a heading in a .txt\nline two".to_owned()
            )]
        );
        assert!(split_plain(" \n\n").is_empty());
    }

    #[test]
    fn knowledge_a_heading_with_no_text_makes_no_passage() {
        let passages = split_markdown("# Empty\n\n# Full\ntext\n");
        assert_eq!(headings(&passages), ["Full"]);
    }
}
