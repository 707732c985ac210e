//! From text to terms: split on anything that is not a letter or a digit, lowercased, then
//! stemmed by the Snowball stemmers of the chosen languages (English, Spanish, Portuguese)
//! twice: the word as written, its stem then folded (NFKD, combining marks dropped), and the
//! folded word, stemmed. Snowball's suffixes carry accents (Portuguese `-ções`), so the first
//! joins "devoluções" and "devolução"; a contact typing without accents gets the second, which
//! matches the same word written with them ("devolucao" finds "devolução"). A word typed
//! without the accent of a common ending (Spanish `-ion`, Portuguese `-cao`, `-coes`) is also
//! stemmed with it, so "devolucion" finds "devoluciones" too.

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// A language the index stems for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    English,
    Spanish,
    Portuguese,
}

impl Language {
    /// Every language stemmed: what an index uses when the tenant names none.
    pub const ALL: [Language; 3] = [Self::English, Self::Spanish, Self::Portuguese];

    /// A language from its ISO 639-1 code or English name (`es`, `spanish`), any case.
    pub fn parse(code: &str) -> Option<Self> {
        match code.trim().to_ascii_lowercase().as_str() {
            "en" | "english" => Some(Self::English),
            "es" | "spanish" => Some(Self::Spanish),
            "pt" | "portuguese" => Some(Self::Portuguese),
            _ => None,
        }
    }

    /// Common endings as a contact types them without accents, and as the language writes
    /// them (longest first): the stemmer's suffix rules only know the accented form.
    fn accented_endings(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::English => &[],
            Self::Spanish => &[("ion", "ión")],
            Self::Portuguese => &[
                ("coes", "ções"),
                ("soes", "sões"),
                ("cao", "ção"),
                ("sao", "são"),
            ],
        }
    }

    /// `word` (folded) with its ending accented as the language writes it, when it ends in
    /// one of [`Self::accented_endings`] typed without the accent.
    fn accented(self, word: &str) -> Option<String> {
        self.accented_endings().iter().find_map(|(plain, written)| {
            let stem = word.strip_suffix(plain)?;
            (!stem.is_empty()).then(|| format!("{stem}{written}"))
        })
    }

    fn algorithm(self) -> Algorithm {
        match self {
            Self::English => Algorithm::English,
            Self::Spanish => Algorithm::Spanish,
            Self::Portuguese => Algorithm::Portuguese,
        }
    }
}

/// Lowercase, compatibility-decomposed, combining marks dropped: `Canción Ñandú` → `cancion
/// nandu`.
pub fn fold(text: &str) -> String {
    text.nfkd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The folded words of `text`, split on every character that is not alphanumeric.
pub fn tokens(text: &str) -> impl Iterator<Item = String> {
    words(text).into_iter().map(|w| fold(&w))
}

/// The lowercase words of `text` as written (accents kept).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Turns text into terms with the stemmers of its languages.
pub struct Analyzer {
    stemmers: Vec<(Language, Stemmer)>,
}

impl Analyzer {
    /// An analyzer stemming for `languages` (none: words are kept whole).
    pub fn new(languages: &[Language]) -> Self {
        Self {
            stemmers: languages
                .iter()
                .map(|l| (*l, Stemmer::create(l.algorithm())))
                .collect(),
        }
    }

    /// Each folded word with its distinct stems (one per language at most; the word itself
    /// when no stemmer changes it or there is none).
    pub fn analyze(&self, text: &str) -> Vec<(String, Vec<String>)> {
        words(text)
            .into_iter()
            .map(|written| {
                let word = fold(&written);
                let mut stems: Vec<String> = Vec::with_capacity(2 * self.stemmers.len().max(1));
                for (language, stemmer) in &self.stemmers {
                    let accented = language.accented(&word);
                    let forms = [
                        Some(fold(&stemmer.stem(&written))),
                        Some(stemmer.stem(&word).into_owned()),
                        accented.map(|w| fold(&stemmer.stem(&w))),
                    ];
                    for stem in forms.into_iter().flatten() {
                        if !stems.contains(&stem) {
                            stems.push(stem);
                        }
                    }
                }
                if stems.is_empty() {
                    stems.push(word.clone());
                }
                (word, stems)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_folding_drops_accents_and_case() {
        assert_eq!(fold("Canción ÑANDÚ Ação"), "cancion nandu acao");
        assert_eq!(fold("ﬁ"), "fi", "compatibility forms decompose");
        let words: Vec<String> = tokens("Guitarra-eléctrica, 3/4 (azul)!").collect();
        assert_eq!(words, ["guitarra", "electrica", "3", "4", "azul"]);
    }

    #[test]
    fn search_stems_join_a_words_forms_in_each_language() {
        // Two words join when they share a stem.
        let join = |language, a: &str, b: &str| {
            let analyzer = Analyzer::new(&[language]);
            let (a, b) = (
                analyzer.analyze(a).remove(0).1,
                analyzer.analyze(b).remove(0).1,
            );
            a.iter().any(|s| b.contains(s))
        };
        assert!(join(Language::English, "guitars", "guitar"));
        assert!(join(Language::Spanish, "guitarras", "guitarra"));
        assert!(join(Language::Spanish, "devoluciones", "devolución"));
        assert!(
            join(Language::Spanish, "devolucion", "devolución"),
            "typed without accents"
        );
        assert!(join(Language::Portuguese, "devoluções", "devolução"));
        assert!(
            join(Language::Portuguese, "devolucao", "devolução"),
            "typed without accents"
        );
        assert!(
            join(Language::Spanish, "devolucion", "devoluciones"),
            "a singular typed without accents finds the plural"
        );
        assert!(join(Language::Spanish, "cancion", "canciones"));
        assert!(
            join(Language::Portuguese, "devolucoes", "devolução"),
            "a plural typed without accents finds the singular"
        );
        assert!(join(Language::Portuguese, "devolucao", "devoluções"));
        assert!(!join(Language::English, "tent", "stove"));
    }

    #[test]
    fn search_language_codes_parse() {
        assert_eq!(Language::parse(" ES "), Some(Language::Spanish));
        assert_eq!(Language::parse("portuguese"), Some(Language::Portuguese));
        assert_eq!(Language::parse("fr"), None);
    }
}
