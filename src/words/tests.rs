use super::*;
use chrono::NaiveDate;

/// The `{}` slots of a template.
fn slots(text: &str) -> usize {
    text.matches("{}").count()
}

/// Texts written the same in every language: none yet (a unit or a brand name would be).
const SAME_IN_EVERY_LANGUAGE: &[Key] = &[];

/// Words Spanish and Portuguese write alike.
const SAME_IN_SPANISH_AND_PORTUGUESE: &[Key] = &[
    Key::Week,
    Key::ChartWeeklyAlt,
    Key::SimNoteWritten,
    Key::ConModel,
];

#[test]
fn words_every_key_has_a_non_empty_translation_with_the_english_slots() {
    for key in Key::ALL {
        let english = text(Language::En, *key);
        for language in Language::ALL {
            let words = text(language, *key);
            assert!(!words.trim().is_empty(), "{key:?} is empty in {language}");
            assert_eq!(
                slots(words),
                slots(english),
                "{key:?} in {language} keeps the English template's slots: {words:?}"
            );
            assert_eq!(
                words.trim(),
                words,
                "{key:?} in {language} has outer spaces"
            );
        }
    }
}

#[test]
fn words_spanish_and_portuguese_are_translated_not_english_left_in_place() {
    let mut untranslated = Vec::new();
    for key in Key::ALL {
        let english = text(Language::En, *key);
        for language in [Language::Es, Language::Pt] {
            if text(language, *key) == english && !SAME_IN_EVERY_LANGUAGE.contains(key) {
                untranslated.push(format!("{key:?} is English in {language}"));
            }
        }
        if text(Language::Es, *key) == text(Language::Pt, *key)
            && !SAME_IN_SPANISH_AND_PORTUGUESE.contains(key)
        {
            untranslated.push(format!("{key:?} is the same in Spanish and Portuguese"));
        }
    }
    assert!(untranslated.is_empty(), "{untranslated:#?}");
}

#[test]
fn words_every_figure_has_a_name_and_a_one_sentence_meaning() {
    for m in ALL_MEASURES {
        for language in Language::ALL {
            let means = m.means(language);
            assert!(means.ends_with('.'), "{:?} in {language}: {means}", m.means);
            assert!(!m.name(language).ends_with('.'), "{:?}", m.name);
            assert!(!means.contains('\n'), "one line: {means}");
        }
    }
}

#[test]
fn words_fill_puts_each_argument_in_its_slot_in_order() {
    assert_eq!(
        fill(Language::En, Key::TitleOf, &["Spoke Lane"]),
        "Spoke Lane: how the sales assistant did"
    );
    assert_eq!(
        fill(Language::Pt, Key::SimNoteWritten, &["resumo", "42"]),
        "nota resumo escrita (42 caracteres)"
    );
    assert_eq!(Words::new(Language::Es).text(Key::Week), "semana");
}

#[test]
fn words_durations_read_in_seconds_or_minutes_with_the_languages_decimal_mark() {
    assert_eq!(duration_ms(Language::En, Some(1647)), "1.6 s");
    assert_eq!(duration_ms(Language::Es, Some(1647)), "1,6 s");
    assert_eq!(duration_ms(Language::En, Some(95_000)), "1.6 min");
    assert_eq!(duration_ms(Language::Pt, Some(95_000)), "1,6 min");
    assert_eq!(duration_ms(Language::En, Some(59_999)), "60.0 s");
    assert_eq!(duration_ms(Language::En, None), "-");
    assert_eq!(percent(Language::Es, Some(0.25)), "25,0 %");
    assert_eq!(hours(Language::Pt, Some(3.5)), "3,5 h");
}

#[test]
fn words_money_names_the_us_dollar_in_each_languages_way() {
    assert_eq!(usd(Language::En, Some(0.42)), "US$ 0.42");
    assert_eq!(usd(Language::Es, Some(0.42)), "0,42 US$");
    assert_eq!(usd(Language::Pt, Some(0.42)), "US$ 0,42");
    // Below ten cents, four decimals: a small cost does not read as zero.
    assert_eq!(usd(Language::En, Some(0.0625)), "US$ 0.0625");
    assert_eq!(usd(Language::En, Some(0.0)), "US$ 0.00");
    // A half is rounded up, as on paper (not to the even digit).
    assert_eq!(usd(Language::En, Some(0.125)), "US$ 0.13");
    assert_eq!(usd(Language::Pt, None), "-");
}

#[test]
fn words_a_week_reads_as_its_dates_with_the_languages_month_names() {
    let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    assert_eq!(week(Language::En, day("2026-12-07")), "7–13 Dec 2026");
    assert_eq!(week(Language::Es, day("2026-12-07")), "7–13 dic 2026");
    assert_eq!(week(Language::Pt, day("2026-12-07")), "7–13 dez 2026");
    assert_eq!(week(Language::En, day("2026-11-30")), "30 Nov – 6 Dec 2026");
    assert_eq!(
        week(Language::Pt, day("2026-12-28")),
        "28 dez 2026 – 3 jan 2027"
    );
    assert_eq!(
        week_short(Language::Es, day("2026-11-30")),
        "30 nov – 6 dic"
    );
    assert_eq!(date(Language::Pt, day("2027-02-01")), "1 fev 2027");
}

#[test]
fn words_stored_names_read_in_the_owners_language_and_unknown_ones_readably() {
    assert_eq!(outcome(Language::En, "answered_inline"), "answered at once");
    assert_eq!(
        outcome(Language::Es, "answered_inline"),
        "respondido al momento"
    );
    assert_eq!(reason(Language::Pt, "complaint"), "fez uma reclamação");
    assert_eq!(tool(Language::Es, "send_flow"), "flujo enviado");
    assert_eq!(status(Language::Pt, "performed"), "feito");
    assert_eq!(
        release(Language::En, "tag_removed"),
        "your team removed the handoff tag"
    );
    assert_eq!(reason(Language::Es, "a_new_reason"), "a new reason");
}

#[test]
fn words_a_moment_reads_as_the_languages_date_to_the_second_in_utc() {
    let at = chrono::DateTime::parse_from_rfc3339("2026-12-07T14:05:09Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    assert_eq!(moment(Language::En, at), "7 Dec 2026, 14:05:09 UTC");
    assert_eq!(moment(Language::Es, at), "7 dic 2026, 14:05:09 UTC");
    assert_eq!(moment(Language::Pt, at), "7 dez 2026, 14:05:09 UTC");
}
