//! (in progress)

pub mod auth;
pub mod client_ip;
pub mod inbound;
pub mod rate_limit;
