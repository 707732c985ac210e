//! The bounded download of a contact's media (020): from the media host only, no redirects,
//! the `Content-Type` matching the kind, the size enforced while the body streams, straight to a
//! file in the turn's private directory (one copy on disk, never the whole file in memory while
//! it arrives). The caller's deadline and abort cancel it by dropping the future.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::{MediaError, MediaKind, MediaRef};

/// 020's limits: 5 MB for an image, 16 MB for audio and video.
pub fn size_limit(kind: MediaKind) -> u64 {
    match kind {
        MediaKind::Image => 5 * 1024 * 1024,
        _ => 16 * 1024 * 1024,
    }
}

/// The HTTP client media is fetched with: no redirects (a redirect is a failure, not followed),
/// a bounded connect; the turn's deadline bounds the rest.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(3))
        .build()
        .expect("a client without custom TLS roots builds")
}

/// A downloaded file.
#[derive(Debug)]
pub struct Downloaded {
    pub path: PathBuf,
    pub len: u64,
    /// The response's media type, lower-cased, without parameters (`audio/ogg`).
    pub media_type: String,
}

/// Fetches `media` into `dir` (the turn's private directory), within `limit` bytes.
pub async fn fetch(
    client: &reqwest::Client,
    media: &MediaRef,
    limit: u64,
    dir: &Path,
) -> Result<Downloaded, MediaError> {
    let mut response = client
        .get(media.url.clone())
        .send()
        .await
        .map_err(|_| MediaError::Download)?;
    let status = response.status();
    if status.is_redirection() {
        return Err(MediaError::Redirect);
    }
    if !status.is_success() {
        return Err(MediaError::Download);
    }
    let media_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if !media_type.starts_with(media.kind.content_type_prefix()) {
        return Err(MediaError::ContentType);
    }
    if response.content_length().is_some_and(|len| len > limit) {
        return Err(MediaError::TooLarge);
    }
    let path = dir.join(format!("original.{}", media.kind.file_extension()));
    // The contact's media is readable by the service's user alone, whatever the umask.
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .await
        .map_err(|_| MediaError::Download)?;
    let mut len = 0u64;
    while let Some(chunk) = response.chunk().await.map_err(|_| MediaError::Download)? {
        len += chunk.len() as u64;
        if len > limit {
            return Err(MediaError::TooLarge);
        }
        file.write_all(&chunk)
            .await
            .map_err(|_| MediaError::Download)?;
    }
    file.flush().await.map_err(|_| MediaError::Download)?;
    if len == 0 {
        return Err(MediaError::Download);
    }
    Ok(Downloaded {
        path,
        len,
        media_type,
    })
}
