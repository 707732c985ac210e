//! (in progress)
use super::{Result, StoreError};
pub struct SqliteStore;
impl SqliteStore {
    pub async fn connect(_url: &str) -> Result<Self> {
        Err(StoreError::UnsupportedUrl)
    }
}
