//! The rules `catalog.json` must satisfy beyond its types.

use super::*;

// ---------------------------------------------------------------------------------------------
// catalog.json

pub fn catalog(file: &str, catalog: &Catalog) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    r.non_empty("$.businessName", &catalog.business_name);
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
        r.non_empty(format!("{at}.name"), &o.name);
        r.non_empty(format!("{at}.description"), &o.description);
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
            r.non_empty(format!("{at}.schedule"), schedule);
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
        r.non_empty(format!("$.faq[{i}].question"), &faq.question);
        r.non_empty(format!("$.faq[{i}].answer"), &faq.answer);
    }

    let mut ids = Unique::new();
    for (i, p) in catalog.payment_options.iter().enumerate() {
        let at = format!("$.paymentOptions[{i}]");
        ids.id(&mut r, format!("{at}.id"), &p.id, "among paymentOptions");
        r.non_empty(format!("{at}.description"), &p.description);
    }
    r.issues
}
