//! Rebuilds when a migration is added or edited: the Postgres migrations are embedded by
//! `sqlx::migrate!` and the SQLite ones by `include_str!`, and only the latter is tracked by
//! cargo on its own.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
