//! (in progress)
use super::{Result, StoreError};
pub struct PgStore;
impl PgStore {
    pub async fn connect(_url: &str) -> Result<Self> {
        Err(StoreError::UnsupportedUrl)
    }
}
