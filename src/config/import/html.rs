//! A product description written in HTML (Shopify's `Body (HTML)`, WooCommerce's descriptions)
//! as plain text: tags dropped, block tags turned into line breaks, `<script>` and `<style>`
//! dropped with their content, comments dropped, the common entities decoded, runs of spaces
//! collapsed. Not a renderer: what is left is the words the shop's page shows.

/// `html` as text (see the module doc).
pub fn to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('&') {
            let (decoded, used) = entity(rest);
            out.push_str(&decoded);
            rest = &rest[used..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let opens_tag = rest[1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!');
        let Some(end) = rest.find('>').filter(|_| opens_tag) else {
            // A lone `<` (as in "price < 20") is text.
            out.push('<');
            rest = &rest[1..];
            continue;
        };
        let tag = rest[1..end].trim();
        rest = &rest[end + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if !tag.starts_with('/') && (name == "script" || name == "style") {
            let close = format!("</{name}");
            let lower = rest.to_ascii_lowercase();
            rest = lower
                .find(&close)
                .and_then(|at| rest[at..].find('>').map(|gt| &rest[at + gt + 1..]))
                .unwrap_or("");
            continue;
        }
        let closing = tag.starts_with('/');
        match name.as_str() {
            "br" => out.push('\n'),
            "li" | "tr" | "td" | "th" if closing => {}
            "p" | "div" | "ul" | "ol" | "table" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"
            | "section" | "article" | "blockquote" => out.push_str("\n\n"),
            "li" | "tr" => out.push('\n'),
            "td" | "th" => out.push(' '),
            _ => {}
        }
    }
    out.push_str(rest);
    tidy(&out)
}

/// Spaces collapsed within lines, at most one blank line between paragraphs, trimmed.
fn tidy(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() && lines.last().is_none_or(String::is_empty) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines.join("\n")
}

/// The entity at the start of `text` and the bytes it used; an unknown one is kept as written.
fn entity(text: &str) -> (String, usize) {
    let Some(end) = text[1..].find(';').map(|e| e + 1).filter(|e| *e <= 10) else {
        return ("&".to_owned(), 1);
    };
    let body = &text[1..end];
    let decoded = match body {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        "ndash" => Some('–'),
        "mdash" => Some('—'),
        "hellip" => Some('…'),
        "rsquo" => Some('’'),
        "lsquo" => Some('‘'),
        "rdquo" => Some('”'),
        "ldquo" => Some('“'),
        "euro" => Some('€'),
        _ => body
            .strip_prefix("#x")
            .or_else(|| body.strip_prefix("#X"))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .or_else(|| body.strip_prefix('#').and_then(|d| d.parse().ok()))
            .and_then(char::from_u32),
    };
    match decoded {
        Some(c) => (c.to_string(), end + 1),
        None => ("&".to_owned(), 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_import_html_descriptions_become_plain_text() {
        let html = "<p>Hand-thrown <strong>stoneware</strong> mug.</p>\
                    <ul><li>350&nbsp;ml</li><li>Dishwasher &amp; microwave safe</li></ul>\
                    <script>alert('x')</script><style>p{}</style><!-- note -->\
                    <p>Glaze: caf&eacute; &#233;cru &#x2014; price &lt; 20</p>";
        assert_eq!(
            to_text(html),
            "Hand-thrown stoneware mug.\n\n350 ml\nDishwasher & microwave safe\n\n\
             Glaze: caf&eacute; écru — price < 20"
        );
        assert_eq!(to_text("plain text, no tags"), "plain text, no tags");
        assert_eq!(to_text("a < b and c > d"), "a < b and c > d");
    }
}
