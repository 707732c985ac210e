//! The owner's console in a real browser: Debian's `chromium`, headless, driven through
//! `chromedriver` over WebDriver (fantoccini), against the real app started as the API suite
//! starts it (the same `tests/api/helpers.rs`, included below, one copy).
//!
//! A separate test target, so the API suite never waits on a browser. Without `chromium` or
//! `chromedriver` every test here fails, saying what to install; none is skipped.

#[allow(dead_code)]
#[path = "../api/bound.rs"]
mod bound;
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../api/helpers.rs"]
mod helpers;

mod driver;

mod console;
mod pages;
mod review;
