//! Numbers, shares, durations, money, dates and weeks as each language writes them: a decimal
//! point in English, a decimal comma in Spanish and Portuguese; US dollars named in each
//! language's way ("US$ 0.42", "0,42 US$", "US$ 0,42"); a week as its dates ("7–13 Dec 2026").

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};

use crate::config::Language;

/// `value` with `places` decimals (a half rounded away from zero, as on paper), in the
/// language's decimal mark.
pub fn decimal(language: Language, value: f64, places: usize) -> String {
    let scale = 10f64.powi(places as i32);
    let rounded = (value * scale).round() / scale;
    let text = format!("{rounded:.places$}");
    match language {
        Language::En => text,
        Language::Es | Language::Pt => text.replace('.', ","),
    }
}

/// A share (0.25) as a percentage with one decimal: "25.0 %", "25,0 %"; `-` when unknown.
pub fn percent(language: Language, share: Option<f64>) -> String {
    share.map_or("-".into(), |s| {
        format!("{} %", decimal(language, s * 100.0, 1))
    })
}

/// A wait in milliseconds in seconds, or in minutes from a minute on: 1647 ms is "1.6 s",
/// 95 000 ms "1.6 min"; `-` when unknown.
pub fn duration_ms(language: Language, ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let seconds = ms as f64 / 1000.0;
    if seconds < 60.0 {
        format!("{} s", decimal(language, seconds, 1))
    } else {
        format!("{} min", decimal(language, seconds / 60.0, 1))
    }
}

/// Hours with one decimal: "3.5 h"; `-` when unknown.
pub fn hours(language: Language, value: Option<f64>) -> String {
    value.map_or("-".into(), |h| format!("{} h", decimal(language, h, 1)))
}

/// An amount in US dollars (the AI model's prices are in US dollars), its currency named as
/// the language writes it: "US$ 0.42" (en), "0,42 US$" (es), "US$ 0,42" (pt). Two decimals,
/// four below ten cents, so a small cost does not read as zero; `-` when unknown.
pub fn usd(language: Language, value: Option<f64>) -> String {
    let Some(value) = value else {
        return "-".into();
    };
    let places = if value != 0.0 && value.abs() < 0.1 {
        4
    } else {
        2
    };
    let amount = decimal(language, value, places);
    match language {
        Language::En | Language::Pt => format!("US$ {amount}"),
        Language::Es => format!("{amount} US$"),
    }
}

/// A count and what it is out of: "(2/4)".
pub fn out_of(part: i64, whole: i64) -> String {
    format!("({part}/{whole})")
}

/// The month's short name (1 = January).
pub fn month(language: Language, month: u32) -> &'static str {
    const EN: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    const ES: [&str; 12] = [
        "ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sept", "oct", "nov", "dic",
    ];
    const PT: [&str; 12] = [
        "jan", "fev", "mar", "abr", "mai", "jun", "jul", "ago", "set", "out", "nov", "dez",
    ];
    let names = match language {
        Language::En => &EN,
        Language::Es => &ES,
        Language::Pt => &PT,
    };
    names[(month.clamp(1, 12) - 1) as usize]
}

/// A day: "7 Dec 2026", "7 dic 2026", "7 dez 2026".
pub fn date(language: Language, day: NaiveDate) -> String {
    format!(
        "{} {} {}",
        day.day(),
        month(language, day.month()),
        day.year()
    )
}

/// A moment, to the second, in UTC: "7 Dec 2026, 14:05:09 UTC".
pub fn moment(language: Language, at: DateTime<Utc>) -> String {
    format!(
        "{}, {} UTC",
        date(language, at.date_naive()),
        at.format("%H:%M:%S")
    )
}

/// The week starting on `monday`, Monday to Sunday, as dates: "7–13 Dec 2026" within a month,
/// "30 Nov – 6 Dec 2026" across two, "28 Dec 2026 – 3 Jan 2027" across two years.
pub fn week(language: Language, monday: NaiveDate) -> String {
    let sunday = monday + Duration::days(6);
    let m = |d: NaiveDate| month(language, d.month());
    if monday.year() != sunday.year() {
        format!("{} – {}", date(language, monday), date(language, sunday))
    } else if monday.month() != sunday.month() {
        format!(
            "{} {} – {} {} {}",
            monday.day(),
            m(monday),
            sunday.day(),
            m(sunday),
            sunday.year()
        )
    } else {
        format!(
            "{}–{} {} {}",
            monday.day(),
            sunday.day(),
            m(sunday),
            sunday.year()
        )
    }
}

/// A week's short label for a chart's axis: "7–13 Dec", "30 Nov – 6 Dec".
pub fn week_short(language: Language, monday: NaiveDate) -> String {
    let sunday = monday + Duration::days(6);
    let m = |d: NaiveDate| month(language, d.month());
    if monday.month() != sunday.month() {
        format!(
            "{} {} – {} {}",
            monday.day(),
            m(monday),
            sunday.day(),
            m(sunday)
        )
    } else {
        format!("{}–{} {}", monday.day(), sunday.day(), m(sunday))
    }
}

/// `text` with its first letter in capitals (a column's name as a heading).
pub fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
