//! Prices in a currency's minor units, the one convention `catalog.json` uses: an amount is an
//! integer of hundredths (45000 is 450.00), except for the currencies whose minor unit is the
//! unit itself (ISO 4217 exponent 0), where it is whole units. The prompt shows prices by the
//! same list, and `catalog import` converts a shop's decimals ("19.90") by it.

/// Currencies whose minor unit is the unit itself (ISO 4217 exponent 0) among those the prompt
/// contract names. HUF is deliberately absent: ISO gives it two decimals. A three-decimal
/// currency (BHD, KWD, …) is kept in hundredths like every other one.
pub const ZERO_DECIMAL_CURRENCIES: &[&str] = &["JPY", "KRW", "CLP", "VND", "ISK"];

/// How many decimals an amount in `currency` has: 0 for [`ZERO_DECIMAL_CURRENCIES`], else 2.
pub fn minor_digits(currency: &str) -> u32 {
    let code = currency.trim().to_ascii_uppercase();
    if ZERO_DECIMAL_CURRENCIES.contains(&code.as_str()) {
        0
    } else {
        2
    }
}

/// Why a written price is not an amount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceError {
    /// Not a plain decimal: digits, at most one `.`, nothing else.
    NotADecimal,
    /// More decimals than the currency has (trailing zeros aside): `19.999` in EUR.
    TooPrecise { digits: u32 },
    /// Larger than any price the catalog holds.
    TooLarge,
}

impl std::fmt::Display for PriceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotADecimal => f.write_str(
                "must be a price written as a plain decimal number, such as 19.90 (digits and \
                 one '.', no currency sign, no thousands separator, not negative)",
            ),
            Self::TooPrecise { digits: 0 } => {
                f.write_str("must be a whole number: the catalog's currency has no decimals")
            }
            Self::TooPrecise { digits } => write!(
                f,
                "must have at most {digits} decimals in the catalog's currency"
            ),
            Self::TooLarge => f.write_str("is larger than any price the catalog can hold"),
        }
    }
}

/// The largest amount accepted, in minor units: far beyond any price, far below `i64::MAX`.
const MAX_AMOUNT: i64 = 1_000_000_000_000_000;

/// `written` (`"19.90"`, `"19.9"`, `"20"`, `" 5000.00 "`) in minor units of `currency`:
/// `1990`, `1990`, `2000`, `5000` (JPY). Trailing zeros beyond the currency's decimals are
/// accepted (a shop writes `5000.00` for yen); any other extra digit is refused, never rounded.
pub fn parse_amount(written: &str, currency: &str) -> Result<i64, PriceError> {
    let written = written.trim();
    let (whole, fraction) = match written.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (written, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) {
        return Err(PriceError::NotADecimal);
    }
    let places = minor_digits(currency);
    let kept = fraction.trim_end_matches('0');
    if kept.len() > places as usize {
        return Err(PriceError::TooPrecise { digits: places });
    }
    let mut amount: i64 = 0;
    let push = |amount: i64, digit: u8| {
        amount
            .checked_mul(10)
            .and_then(|a| a.checked_add(i64::from(digit - b'0')))
            .filter(|a| *a <= MAX_AMOUNT)
            .ok_or(PriceError::TooLarge)
    };
    for b in whole.bytes() {
        amount = push(amount, b)?;
    }
    for i in 0..places as usize {
        amount = push(amount, kept.as_bytes().get(i).copied().unwrap_or(b'0'))?;
    }
    Ok(amount)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shop_decimal_becomes_minor_units_by_the_currency() {
        assert_eq!(parse_amount("19.90", "EUR"), Ok(1990));
        assert_eq!(parse_amount("19.9", "USD"), Ok(1990));
        assert_eq!(parse_amount("20", "GBP"), Ok(2000));
        assert_eq!(parse_amount(".5", "GBP"), Ok(50));
        assert_eq!(parse_amount("0", "EUR"), Ok(0));
        assert_eq!(parse_amount(" 5000.00 ", "JPY"), Ok(5000));
        assert_eq!(parse_amount("5000", "jpy"), Ok(5000));
        assert_eq!(parse_amount("1.250", "BHD"), Ok(125));
    }

    #[test]
    fn a_price_that_is_not_a_plain_decimal_or_too_precise_is_refused_never_rounded() {
        for bad in [
            "", "abc", "-5", "19,90", "1,299.00", "$19", "1e3", "19.9.9", ".",
        ] {
            assert_eq!(
                parse_amount(bad, "EUR"),
                Err(PriceError::NotADecimal),
                "{bad}"
            );
        }
        assert_eq!(
            parse_amount("19.999", "EUR"),
            Err(PriceError::TooPrecise { digits: 2 })
        );
        assert_eq!(
            parse_amount("5000.5", "JPY"),
            Err(PriceError::TooPrecise { digits: 0 })
        );
        assert_eq!(
            parse_amount("99999999999999999999", "EUR"),
            Err(PriceError::TooLarge)
        );
    }
}
