//! The rules `catalog.json` must satisfy beyond its types.

use super::*;

// ---------------------------------------------------------------------------------------------
// catalog.json

pub fn catalog(file: &str, catalog: &Catalog) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    r.text("$.businessName", &catalog.business_name, MAX_NAME_CHARS);
    let currency_ok =
        catalog.currency.len() == 3 && catalog.currency.bytes().all(|b| b.is_ascii_uppercase());
    if !currency_ok {
        r.push(
            "$.currency",
            "must be a three-letter ISO 4217 code in capitals, e.g. USD",
        );
    }

    if catalog.offerings.is_empty() {
        r.push("$.offerings", "must list at least one offering");
    }
    let mut ids = Unique::new();
    for (i, o) in catalog.offerings.iter().enumerate() {
        let at = format!("$.offerings[{i}]");
        ids.id(&mut r, format!("{at}.id"), &o.id, "among offerings");
        r.text(format!("{at}.name"), &o.name, MAX_NAME_CHARS);
        r.text(
            format!("{at}.description"),
            &o.description,
            MAX_DESCRIPTION_CHARS,
        );
        if o.price.amount < 0 {
            r.push(
                format!("{at}.price.amount"),
                "must be zero or more (minor units)",
            );
        }
        if o.price.currency != catalog.currency {
            r.push(
                format!("{at}.price.currency"),
                "must equal the catalog's currency",
            );
        }
        if let Some(hours) = o.duration_hours
            && !(hours.is_finite() && hours > 0.0)
        {
            r.push(format!("{at}.durationHours"), "must be greater than zero");
        }
        if let Some(schedule) = &o.schedule {
            r.text(format!("{at}.schedule"), schedule, MAX_DESCRIPTION_CHARS);
        }
        if let Some(url) = &o.url {
            let https = reqwest::Url::parse(url)
                .is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some());
            if !https {
                r.push(format!("{at}.url"), "must be an https:// URL");
            }
        }
    }

    for (i, faq) in catalog.faq.iter().enumerate() {
        r.text(
            format!("$.faq[{i}].question"),
            &faq.question,
            MAX_DESCRIPTION_CHARS,
        );
        r.text(
            format!("$.faq[{i}].answer"),
            &faq.answer,
            MAX_DESCRIPTION_CHARS,
        );
    }

    let mut ids = Unique::new();
    for (i, p) in catalog.payment_options.iter().enumerate() {
        let at = format!("$.paymentOptions[{i}]");
        ids.id(&mut r, format!("{at}.id"), &p.id, "among paymentOptions");
        r.text(
            format!("{at}.description"),
            &p.description,
            MAX_DESCRIPTION_CHARS,
        );
    }
    r.issues
}
