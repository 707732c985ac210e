//! Business hours (`rules.json` `hours`): when a handoff happens outside them the contact gets
//! `messages.escalationClosed` instead of `messages.escalation` (the tag, the flow and the hold
//! are unchanged). Without `hours` the business is always open.
//!
//! Pure: the schedule parsed from the config (`Schedule::parse`, each problem named by its JSON
//! path), whether it is open at an instant, and when it next opens. Local times are read in the
//! tenant's IANA zone (`chrono-tz`), so a daylight-saving change moves the opening with the
//! clocks: a 09:00 opening is 09:00 on the wall on both sides of the change.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

use super::Hours;

/// The days of `weekly`, in ManyChat's week order (Monday first).
pub const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Mon),
    ("tue", Weekday::Tue),
    ("wed", Weekday::Wed),
    ("thu", Weekday::Thu),
    ("fri", Weekday::Fri),
    ("sat", Weekday::Sat),
    ("sun", Weekday::Sun),
];

/// An opening within one day, in minutes since local midnight (`end` up to 1440: `24:00`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    start: u32,
    end: u32,
}

/// The business's week, its zone and its closed dates.
#[derive(Debug, Clone)]
pub struct Schedule {
    zone: Tz,
    /// Per weekday (Monday = 0), its openings in order.
    week: [Vec<Range>; 7],
    closed: Vec<NaiveDate>,
}

impl Schedule {
    /// The schedule `hours` describes, or every problem as (JSON path, rule).
    pub fn parse(hours: &Hours) -> Result<Self, Vec<(String, String)>> {
        let mut problems = Vec::new();
        let zone = match hours.timezone.parse::<Tz>() {
            Ok(zone) => Some(zone),
            Err(_) => {
                problems.push((
                    "$.hours.timezone".to_owned(),
                    "must be an IANA time zone such as Europe/Madrid".to_owned(),
                ));
                None
            }
        };
        let mut week: [Vec<Range>; 7] = Default::default();
        for (day, ranges) in &hours.weekly {
            let Some(index) = DAYS.iter().position(|(name, _)| name == day) else {
                problems.push((
                    format!("$.hours.weekly.{day}"),
                    "unknown day: use mon, tue, wed, thu, fri, sat or sun".to_owned(),
                ));
                continue;
            };
            let mut parsed = Vec::new();
            for (i, raw) in ranges.iter().enumerate() {
                let path = format!("$.hours.weekly.{day}[{i}]");
                match parse_range(raw) {
                    Some(range) if range.start < range.end => parsed.push((path, range)),
                    Some(_) => problems.push((path, "the range must end after it starts".into())),
                    None => problems.push((
                        path,
                        "must be a range HH:MM-HH:MM such as 09:00-13:00 (24:00 ends the day)"
                            .into(),
                    )),
                }
            }
            parsed.sort_by_key(|(_, r)| r.start);
            for pair in parsed.windows(2) {
                if pair[1].1.start < pair[0].1.end {
                    problems.push((
                        pair[1].0.clone(),
                        "overlaps another range of the day".into(),
                    ));
                }
            }
            week[index] = parsed.into_iter().map(|(_, r)| r).collect();
        }
        let mut closed = Vec::new();
        for (i, raw) in hours.closed.iter().enumerate() {
            match NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
                Ok(date) if raw.len() == 10 => closed.push(date),
                _ => problems.push((
                    format!("$.hours.closed[{i}]"),
                    "must be a date YYYY-MM-DD".to_owned(),
                )),
            }
        }
        match zone {
            Some(zone) if problems.is_empty() => Ok(Self { zone, week, closed }),
            _ => Err(problems),
        }
    }

    /// Whether the business is open at `at`.
    pub fn is_open(&self, at: DateTime<Utc>) -> bool {
        let local = at.with_timezone(&self.zone);
        let date = local.date_naive();
        if self.closed.contains(&date) {
            return false;
        }
        let minute = local
            .time()
            .signed_duration_since(NaiveTime::MIN)
            .num_minutes() as u32;
        self.ranges(date)
            .iter()
            .any(|r| r.start <= minute && minute < r.end)
    }

    /// When the business next opens at or after `at` (`at` itself when open), looking a year
    /// ahead; `None` when it never opens in that time.
    pub fn next_open(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.is_open(at) {
            return Some(at);
        }
        let first = at.with_timezone(&self.zone).date_naive();
        for offset in 0..=366 {
            let date = first + Duration::days(offset);
            if self.closed.contains(&date) {
                continue;
            }
            for range in self.ranges(date) {
                let Some(opens) = self.instant(date, range.start) else {
                    continue;
                };
                if opens >= at {
                    return Some(opens);
                }
            }
        }
        None
    }

    fn ranges(&self, date: NaiveDate) -> &[Range] {
        &self.week[date.weekday().num_days_from_monday() as usize]
    }

    /// The instant of `minute` past local midnight on `date`; a time the clocks skip (a
    /// spring-forward gap) opens at the first instant after it.
    fn instant(&self, date: NaiveDate, minute: u32) -> Option<DateTime<Utc>> {
        let time = NaiveTime::from_hms_opt(minute / 60, minute % 60, 0)?;
        let local = date.and_time(time);
        match self.zone.from_local_datetime(&local) {
            chrono::LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
            chrono::LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
            chrono::LocalResult::None => (1..=180).find_map(|m| {
                self.zone
                    .from_local_datetime(&(local + Duration::minutes(m)))
                    .earliest()
                    .map(|t| t.with_timezone(&Utc))
            }),
        }
    }
}

/// What `config check` says of the business's hours at `now`.
pub fn describe(hours: Option<&Hours>, now: DateTime<Utc>) -> String {
    let Some(hours) = hours else {
        return "business hours: none set, always open".to_owned();
    };
    let Ok(schedule) = Schedule::parse(hours) else {
        return "business hours: invalid".to_owned();
    };
    let zone = schedule.zone;
    if schedule.is_open(now) {
        return format!("business hours ({zone}): open now");
    }
    match schedule.next_open(now) {
        Some(at) => format!(
            "business hours ({zone}): closed now; next opens {}",
            at.with_timezone(&zone).format("%a %Y-%m-%d %H:%M %Z")
        ),
        None => {
            format!("business hours ({zone}): closed now, and opens on no day in the next year")
        }
    }
}

/// `HH:MM-HH:MM`, minutes since midnight; `24:00` only as an end.
fn parse_range(raw: &str) -> Option<Range> {
    let (start, end) = raw.trim().split_once('-')?;
    let start = parse_time(start.trim())?;
    let end = parse_time(end.trim())?;
    (start < 1440).then_some(Range { start, end })
}

fn parse_time(raw: &str) -> Option<u32> {
    let (h, m) = raw.split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    match (h, m) {
        (24, 0) => Some(1440),
        (0..=23, 0..=59) => Some(h * 60 + m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn hours(zone: &str, weekly: &[(&str, &[&str])], closed: &[&str]) -> Hours {
        Hours {
            timezone: zone.to_owned(),
            weekly: weekly
                .iter()
                .map(|(d, r)| (d.to_string(), r.iter().map(|s| s.to_string()).collect()))
                .collect::<BTreeMap<_, _>>(),
            closed: closed.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    fn madrid() -> Schedule {
        let days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
        let weekly: Vec<(&str, &[&str])> = days
            .iter()
            .map(|d| (*d, &["09:00-13:00", "14:00-18:00"][..]))
            .collect();
        Schedule::parse(&hours("Europe/Madrid", &weekly, &["2026-12-25"])).unwrap()
    }

    #[test]
    fn hours_opening_follows_the_wall_clock_across_a_daylight_saving_change() {
        let s = madrid();
        // Europe/Madrid moves from UTC+1 to UTC+2 on 2026-03-29.
        assert!(!s.is_open(utc(2026, 3, 28, 7, 30)), "08:30 local, winter");
        assert!(
            s.is_open(utc(2026, 3, 28, 8, 0)),
            "09:00 local is 08:00 UTC in winter"
        );
        assert!(!s.is_open(utc(2026, 3, 30, 6, 30)), "08:30 local, summer");
        assert!(
            s.is_open(utc(2026, 3, 30, 7, 0)),
            "09:00 local is 07:00 UTC in summer"
        );
        assert_eq!(
            s.next_open(utc(2026, 3, 28, 17, 30)),
            Some(utc(2026, 3, 29, 7, 0)),
            "after Saturday's close (18:30 local), Sunday 09:00 summer time"
        );
    }

    #[test]
    fn hours_a_closed_date_is_closed_all_day_and_opening_moves_to_the_next_day() {
        let s = madrid();
        assert!(!s.is_open(utc(2026, 12, 25, 10, 0)));
        assert!(s.is_open(utc(2026, 12, 24, 10, 0)));
        assert_eq!(
            s.next_open(utc(2026, 12, 25, 10, 0)),
            Some(utc(2026, 12, 26, 8, 0))
        );
    }

    #[test]
    fn hours_lunch_break_and_a_whole_day_range() {
        let s = madrid();
        assert!(
            !s.is_open(utc(2026, 1, 5, 12, 30)),
            "13:30 local, the break"
        );
        let all = Schedule::parse(&hours("UTC", &[("mon", &["00:00-24:00"])], &[])).unwrap();
        assert!(all.is_open(utc(2026, 1, 5, 23, 59)));
        assert!(!all.is_open(utc(2026, 1, 6, 0, 0)), "Tuesday has no hours");
        assert_eq!(
            all.next_open(utc(2026, 1, 6, 0, 0)),
            Some(utc(2026, 1, 12, 0, 0))
        );
    }

    #[test]
    fn hours_config_check_says_whether_open_now_and_when_it_next_opens() {
        let h = hours("Europe/Madrid", &[("mon", &["09:00-18:00"])], &[]);
        assert_eq!(
            describe(Some(&h), utc(2026, 1, 5, 10, 0)),
            "business hours (Europe/Madrid): open now"
        );
        assert_eq!(
            describe(Some(&h), utc(2026, 1, 5, 18, 0)),
            "business hours (Europe/Madrid): closed now; next opens Mon 2026-01-12 09:00 CET"
        );
        assert_eq!(
            describe(None, utc(2026, 1, 5, 18, 0)),
            "business hours: none set, always open"
        );
    }

    #[test]
    fn hours_refusals_name_the_json_path() {
        let paths = |h: Hours| -> Vec<String> {
            Schedule::parse(&h)
                .unwrap_err()
                .into_iter()
                .map(|(p, _)| p)
                .collect()
        };
        assert_eq!(paths(hours("Mars/Olympus", &[], &[])), ["$.hours.timezone"]);
        assert_eq!(
            paths(hours("UTC", &[("monday", &[])], &[])),
            ["$.hours.weekly.monday"]
        );
        assert_eq!(
            paths(hours(
                "UTC",
                &[(
                    "mon",
                    &["9:00-13:00", "13:00-12:00", "25:00-26:00", "24:00-24:00"]
                )],
                &[]
            )),
            [
                "$.hours.weekly.mon[0]",
                "$.hours.weekly.mon[1]",
                "$.hours.weekly.mon[2]",
                "$.hours.weekly.mon[3]"
            ]
        );
        assert_eq!(
            paths(hours(
                "UTC",
                &[("tue", &["09:00-13:00", "12:00-15:00"])],
                &[]
            )),
            ["$.hours.weekly.tue[1]"]
        );
        assert_eq!(
            paths(hours("UTC", &[], &["2026-13-01", "25/12/2026", "2026-1-5"])),
            [
                "$.hours.closed[0]",
                "$.hours.closed[1]",
                "$.hours.closed[2]"
            ]
        );
    }
}
