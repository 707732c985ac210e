//! One contact's share of the day's budget (`rules.json` `budget.perContactDailyTokenCap`): a
//! contact whose turns today have spent the share is handed to a person (`budget_contact`),
//! while the business's cap keeps serving every other contact.
//!
//! The share counts the tokens recorded on the contact's conversation since the start of the
//! day (UTC, like the business's cap); the store is read only when the tenant sets the share.

use chrono::{DateTime, Utc};

use super::TurnEngine;
use super::gates::Denial;
use crate::config::TenantConfig;
use crate::store::{Conversation, StoreError};

impl TurnEngine {
    /// `Err(Denial::BudgetContact)` when the contact has spent its share of today.
    pub(super) async fn contact_budget(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        now: DateTime<Utc>,
    ) -> Result<Result<(), Denial>, StoreError> {
        let Some(cap) = config.rules.budget.per_contact_daily_token_cap else {
            return Ok(Ok(()));
        };
        let (from, until) = day_of(now);
        let spent = self
            .inner
            .store
            .contact_tokens(conversation.id, from, until)
            .await?;
        Ok(if over_share(spent, cap) {
            Err(Denial::BudgetContact)
        } else {
            Ok(())
        })
    }
}

/// The UTC day `now` falls in, as `[start, next start)`.
fn day_of(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = now
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .map_or(now, |midnight| midnight.and_utc());
    (start, start + chrono::Duration::days(1))
}

/// Whether `spent` tokens reach the contact's share `cap`.
fn over_share(spent: i64, cap: u64) -> bool {
    spent >= i64::try_from(cap).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_contact_the_share_is_reached_at_the_cap_within_the_utc_day() {
        assert!(!over_share(999, 1000));
        assert!(over_share(1000, 1000));
        let now = DateTime::parse_from_rfc3339("2026-03-04T17:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let (from, until) = day_of(now);
        assert_eq!(from.to_rfc3339(), "2026-03-04T00:00:00+00:00");
        assert_eq!(until.to_rfc3339(), "2026-03-05T00:00:00+00:00");
    }
}
