//! Ids made from the business's own words: a document's file name (its passages' stem), a shop's
//! product handle, SKU or name (an imported offering's id). The result follows the configured id
//! rule, `^[a-z0-9_-]+$`: letters lowercased, accents folded (`Café` → `cafe`), every other run
//! of characters one `-`, no `-` at either end, at most `max` characters (cut at a `-` when one
//! is near the end, so a word is not split where it can be helped).

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// `text` as an id of at most `max` characters; empty when `text` holds no Latin letter or
/// digit (a name in another script): the caller decides what stands in.
pub fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut gap = false;
    for c in text.nfd().filter(|c| !is_combining_mark(*c)) {
        let c = match c {
            'ß' => 's',
            'æ' | 'Æ' => 'a',
            'ø' | 'Ø' => 'o',
            'đ' | 'Đ' => 'd',
            'ł' | 'Ł' => 'l',
            c => c.to_ascii_lowercase(),
        };
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            if gap && !out.is_empty() {
                out.push('-');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    if out.len() > max {
        out.truncate(max);
        // Cut at the last separator when it keeps most of the id.
        if let Some(at) = out.rfind('-').filter(|at| *at >= max / 2) {
            out.truncate(at);
        }
        while out.ends_with('-') {
            out.pop();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_follows_the_id_rule_folding_accents_and_joining_words_with_dashes() {
        assert_eq!(
            slug("Política de Devoluções.md", 64),
            "politica-de-devolucoes-md"
        );
        assert_eq!(
            slug("  Wheel   Throwing: Basics!! ", 64),
            "wheel-throwing-basics"
        );
        assert_eq!(slug("SKU_12/AB", 64), "sku_12-ab");
        assert_eq!(slug("Straße", 64), "strase");
        assert_eq!(slug("日本語", 64), "");
        assert_eq!(slug("---", 64), "");
        let long = slug("alpha beta gamma delta epsilon", 20);
        assert_eq!(long, "alpha-beta-gamma");
        assert!(crate::config::is_valid_id(&long));
    }
}
