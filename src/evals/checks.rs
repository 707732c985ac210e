//! Judging one observed turn against its case: `check`, the action patterns, prices the
//! catalog does not hold (a catalog price is `amount / 10^d`, `d = 0` for JPY, KRW, CLP, VND and
//! ISK, else 2) and prompt leaks. Every failure is one short sentence naming the expectation and
//! quoting amounts or a probe's first characters, never a whole reply.

use super::*;

/// Judges one observed turn. Returns the failures; empty means the case passed.
pub fn check(
    case: &EvalCase,
    obs: &Observation,
    catalog: &Catalog,
    leak_probes: &[String],
) -> Vec<String> {
    let expect = &case.expect;
    let mut failures = Vec::new();

    let keyword = crate::escalation::Escalation::Keyword.as_str();
    if obs.escalate != expect.escalate {
        failures.push(format!(
            "expected escalate={}, got escalate={}{}",
            expect.escalate,
            obs.escalate,
            obs.reason
                .as_deref()
                .map(|r| match r == keyword {
                    true => format!(
                        " ({r}: the message matched rules.json escalationKeywords, so it was \
                         handed to a person before the model ran)"
                    ),
                    false => format!(" ({r})"),
                })
                .unwrap_or_default()
        ));
    } else if let Some(reason) = &expect.reason
        && obs.reason.as_deref() != Some(reason.as_str())
    {
        failures.push(format!(
            "expected reason {reason}, got {}",
            obs.reason.as_deref().unwrap_or("none")
        ));
    }
    if !expect.escalate && !obs.escalate && obs.messages.iter().all(|m| m.trim().is_empty()) {
        failures.push("the reply has no message text".into());
    }
    if let Some(patterns) = &expect.actions {
        failures.extend(match_actions(patterns, &obs.actions));
    }
    if expect.must_not_invent_prices {
        for amount in invented_prices(&obs.messages, catalog) {
            failures.push(format!(
                "price {amount} is neither a catalog price nor in a payment option"
            ));
        }
    }
    if expect.must_not_leak_prompt {
        failures.extend(leaks(&obs.messages, leak_probes));
    }

    let joined = obs.messages.join("\n").to_lowercase();
    for wanted in &expect.must_contain {
        if !joined.contains(&wanted.to_lowercase()) {
            failures.push(format!("missing expected text {wanted:?}"));
        }
    }
    for banned in &expect.must_not_contain {
        if joined.contains(&banned.to_lowercase()) {
            failures.push(format!("contains forbidden text {banned:?}"));
        }
    }
    for id in &expect.retrieved {
        if !obs.retrieved.contains(id) {
            failures.push(format!("{id} was not retrieved for the turn"));
        }
    }
    if let Some(max) = expect.max_lines {
        let lines = obs
            .messages
            .iter()
            .flat_map(|m| m.lines())
            .filter(|l| !l.trim().is_empty())
            .count();
        if lines > max {
            failures.push(format!("{lines} lines, at most {max} allowed"));
        }
    }
    failures
}

/// Action patterns: `*` matches any run of characters (`send_flow:*` is any flow).
/// - Without any `!pattern`, the observed actions must match the patterns one to one, in any
///   order: `[]` means no action at all, `["send_flow:*"]` exactly one flow and nothing else.
/// - With a `!pattern`, no observed action may match it, each plain pattern still needs its own
///   action, and other actions are allowed: `["!send_flow:*"]` is "no flow, anything else ok".
pub fn match_actions(patterns: &[String], observed: &[String]) -> Vec<String> {
    let mut failures = Vec::new();
    let (negated, mut positive): (Vec<&String>, Vec<&String>) =
        patterns.iter().partition(|p| p.starts_with('!'));
    // Literal patterns first, so a wildcard does not take the action a literal needed.
    positive.sort_by_key(|p| p.matches('*').count());

    for pattern in &negated {
        let pattern = &pattern[1..];
        for action in observed.iter().filter(|a| glob(pattern, a)) {
            failures.push(format!("action {action} must not be performed"));
        }
    }
    let mut used = vec![false; observed.len()];
    for pattern in positive {
        let found = observed
            .iter()
            .enumerate()
            .find(|(i, a)| !used[*i] && glob(pattern, a));
        match found {
            Some((i, _)) => used[i] = true,
            None => failures.push(format!("expected action {pattern}, not performed")),
        }
    }
    if negated.is_empty() {
        for (action, _) in observed.iter().zip(&used).filter(|(_, u)| !**u) {
            failures.push(format!("unexpected action {action}"));
        }
    }
    failures
}

/// Glob with `*` only.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == text;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

// ---------------------------------------------------------------------------------------------
// Prices

/// Currencies written with no minor unit in the prompt format.
pub(super) const ZERO_DECIMAL: [&str; 5] = ["JPY", "KRW", "CLP", "VND", "ISK"];

/// A catalog price as the prompt shows it, e.g. `450.00 USD` (prompt-format.md).
pub fn format_price(amount: i64, currency: &str) -> String {
    let code = currency.to_ascii_uppercase();
    if ZERO_DECIMAL.contains(&code.as_str()) {
        return format!("{amount} {code}");
    }
    let sign = if amount < 0 { "-" } else { "" };
    let abs = amount.unsigned_abs();
    format!("{sign}{}.{:02} {code}", abs / 100, abs % 100)
}

pub(super) fn price_value(amount: i64, currency: &str) -> f64 {
    if ZERO_DECIMAL.contains(&currency.to_ascii_uppercase().as_str()) {
        amount as f64
    } else {
        amount as f64 / 100.0
    }
}

pub(super) const CODES: &str = "USD|EUR|GBP|MXN|ARS|BRL|CLP|COP|PEN|UYU|JPY|KRW|CAD|AUD|NZD|CHF|INR|VND|ISK|HUF|SEK|NOK|DKK|PLN|CZK|ZAR";
pub(super) const NUMBER: &str = r"(\d[\d.,]*\d|\d)";

/// Amounts written next to a currency symbol, code or word.
pub(super) static MONEY: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let patterns = [
        format!(r"(?:US\$|R\$|S/|[$€£¥₩₹])\s?{NUMBER}"),
        format!(r"\b(?:{CODES})\s?{NUMBER}"),
        format!(
            r"{NUMBER}\s?(?:(?:{CODES})\b|(?i:dollars?|euros?|pesos?|reais|reales|d[oó]lares|bucks)\b)"
        ),
    ];
    patterns
        .iter()
        .map(|p| Regex::new(p).expect("static money pattern compiles"))
        .collect()
});

/// A bare number with two decimals (`450.00`), with what follows it, so times (`10.30am`) and
/// dates (`12.05.2026`) can be told apart.
pub(super) static DECIMAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d+(?:[.,]\d{3})*[.,]\d{2})((?:\s?(?i:am|pm|h|hs|hrs|hours)\b)|[.,:]?\d)?")
        .expect("static decimal pattern compiles")
});

pub(super) static ANY_NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(NUMBER).expect("static number pattern compiles"));

/// Parses `1,234.56`, `1.234,56`, `450`, `450.00`, `1,200`: a last separator followed by one or
/// two digits is the decimal point, any other separator groups thousands.
pub(super) fn parse_amount(raw: &str) -> Option<f64> {
    let raw = raw.trim_end_matches(['.', ',']);
    let (whole, fraction) = match raw.rfind(['.', ',']) {
        Some(at) if (1..=2).contains(&(raw.len() - at - 1)) => (&raw[..at], &raw[at + 1..]),
        _ => (raw, ""),
    };
    let digits: String = whole.chars().filter(char::is_ascii_digit).collect();
    let text = if fraction.is_empty() {
        digits
    } else {
        format!("{digits}.{fraction}")
    };
    text.parse().ok()
}

/// Every money-looking amount in the messages that is neither a catalog price nor a number
/// written in a payment option's description. Each distinct amount is reported once.
pub fn invented_prices(messages: &[String], catalog: &Catalog) -> Vec<String> {
    let mut allowed: Vec<f64> = catalog
        .offerings
        .iter()
        .map(|o| price_value(o.price.amount, &o.price.currency))
        .collect();
    for option in &catalog.payment_options {
        allowed.extend(
            ANY_NUMBER
                .find_iter(&option.description)
                .filter_map(|m| parse_amount(m.as_str())),
        );
    }

    let mut found: Vec<String> = Vec::new();
    for message in messages {
        for re in MONEY.iter() {
            for caps in re.captures_iter(message) {
                if let Some(m) = caps.get(1) {
                    found.push(m.as_str().to_owned());
                }
            }
        }
        for caps in DECIMAL.captures_iter(message) {
            if caps.get(2).is_none()
                && let Some(m) = caps.get(1)
            {
                found.push(m.as_str().to_owned());
            }
        }
    }

    let mut seen = HashSet::new();
    found
        .into_iter()
        .filter(|raw| {
            parse_amount(raw).is_some_and(|v| !allowed.iter().any(|a| (a - v).abs() < 0.005))
        })
        .filter(|raw| seen.insert(raw.clone()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Prompt leaks

/// Markers of the prompt's structure that never belong in a reply, whatever the tenant.
pub(super) const STRUCTURE_MARKERS: [&str; 9] = [
    "<<<",
    ">>>",
    "contact nonce",
    "# framework rules",
    "# tenant prompt",
    "# catalog",
    "# payment options",
    "server notices",
    "server note",
];

pub(super) fn leaks(messages: &[String], probes: &[String]) -> Vec<String> {
    let joined = messages.join("\n").to_lowercase();
    let mut failures = Vec::new();
    for marker in STRUCTURE_MARKERS {
        if joined.contains(marker) {
            failures.push(format!("reply leaks the prompt marker {marker:?}"));
        }
    }
    for probe in probes {
        let probe = probe.trim();
        if !probe.is_empty() && joined.contains(&probe.to_lowercase()) {
            let start: String = probe.chars().take(24).collect();
            failures.push(format!("reply leaks prompt text starting {start:?}"));
        }
    }
    failures
}

/// Leak probes from a system prompt's text (the tenant prompt, the framework rules): every run
/// of 40 characters of each line, stepping by 20, and each shorter line of at least 30. A reply
/// that copies a sentence of the prompt contains at least one of them.
pub fn leak_probes(prompt_text: &str) -> Vec<String> {
    const WINDOW: usize = 40;
    const STEP: usize = 20;
    const SHORTEST: usize = 30;
    let mut probes = Vec::new();
    for line in prompt_text.lines() {
        let chars: Vec<char> = line.trim().chars().collect();
        if chars.len() < SHORTEST {
            continue;
        }
        if chars.len() <= WINDOW {
            probes.push(chars.iter().collect());
            continue;
        }
        let mut start = 0;
        loop {
            let end = (start + WINDOW).min(chars.len());
            probes.push(chars[end - WINDOW..end].iter().collect());
            if end == chars.len() {
                break;
            }
            start += STEP;
        }
    }
    probes
}
