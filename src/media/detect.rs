//! Which inbound `text` is a contact's media (020), in ManyChat's terms: when the contact sends
//! a voice note, an image or a video, ManyChat puts the file's URL on its file host in `text`.
//!
//! `text` is media only when the whole trimmed value is a URL of the form
//! `https://<media host>/<digits>/wa/<yyyy>/<mm>/<dd>/original_<hex>.<ext>`, the host compared as
//! a parsed hostname (and port) against `MANYCHAT_MEDIA_BASE`, with its scheme. The extension
//! decides the kind. A URL inside a sentence, on another host or over plain HTTP stays text; a
//! lone URL that nearly matches is reported as a near miss, so the caller logs
//! `media_url_unmatched` (never the URL).

use std::sync::LazyLock;

use regex::Regex;
use reqwest::Url;

use super::{MediaKind, MediaRef};

/// ManyChat's file host: the default `MANYCHAT_MEDIA_BASE`.
pub const DEFAULT_MEDIA_BASE: &str = "https://manybot-files.s3.eu-central-1.amazonaws.com";

/// The path ManyChat gives a WhatsApp file; the extension is captured.
static MEDIA_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^/[0-9]+/wa/[0-9]{4}/[0-9]{2}/[0-9]{2}/original_[0-9a-fA-F]+\.([A-Za-z0-9]+)$")
        .expect("a valid pattern")
});

/// The file host media is accepted from (and downloaded from): `MANYCHAT_MEDIA_BASE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaHost {
    scheme: String,
    host: String,
    port: Option<u16>,
}

/// Why a `MANYCHAT_MEDIA_BASE` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "must be an https:// URL (plain http:// only for a loopback address) with a host and no path"
)]
pub struct InvalidMediaBase;

impl MediaHost {
    /// Parses `MANYCHAT_MEDIA_BASE`: HTTPS, or plain HTTP on a loopback address (tests, the
    /// demo); no path, query or credentials.
    pub fn parse(base: &str) -> Result<Self, InvalidMediaBase> {
        let url = Url::parse(base.trim()).map_err(|_| InvalidMediaBase)?;
        let host = url.host_str().ok_or(InvalidMediaBase)?.to_ascii_lowercase();
        let loopback = host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
        let bare = matches!(url.path(), "" | "/")
            && url.query().is_none()
            && url.username().is_empty()
            && url.password().is_none();
        if !scheme_ok || !bare {
            return Err(InvalidMediaBase);
        }
        Ok(Self {
            scheme: url.scheme().to_owned(),
            host,
            port: url.port(),
        })
    }

    /// Whether `url` is on this host, with this scheme and port.
    pub(super) fn owns(&self, url: &Url) -> bool {
        url.scheme() == self.scheme
            && url
                .host_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(&self.host))
            && url.port() == self.port
    }
}

impl Default for MediaHost {
    fn default() -> Self {
        Self::parse(DEFAULT_MEDIA_BASE).expect("the default media base is valid")
    }
}

/// What an inbound `text` is.
#[derive(Debug)]
pub enum Detected {
    /// Typed text.
    Text,
    /// A lone URL that has the media path but not the host or scheme, or the host but not the
    /// path: still text, logged as `media_url_unmatched`.
    NearMiss,
    Media(MediaRef),
}

/// Reads `text` as ManyChat's media URL on `host`, or not.
pub fn detect(text: &str, host: &MediaHost) -> Detected {
    let value = text.trim();
    // A URL inside a sentence is text: the whole value must be one URL.
    if value.is_empty() || value.chars().any(char::is_whitespace) || !value.contains("://") {
        return Detected::Text;
    }
    let Ok(url) = Url::parse(value) else {
        return Detected::Text;
    };
    let shaped = url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    let path = shaped.then(|| MEDIA_PATH.captures(url.path())).flatten();
    match (host.owns(&url), path) {
        (true, Some(captures)) => {
            let extension = captures[1].to_ascii_lowercase();
            Detected::Media(MediaRef {
                kind: MediaKind::of_extension(&extension),
                url,
            })
        }
        (true, None) => Detected::NearMiss,
        (false, Some(_)) => Detected::NearMiss,
        (false, None) => {
            let same_host = url
                .host_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(&host.host));
            if same_host {
                Detected::NearMiss
            } else {
                Detected::Text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://manybot-files.s3.eu-central-1.amazonaws.com";

    fn kind(text: &str) -> Option<MediaKind> {
        match detect(text, &MediaHost::default()) {
            Detected::Media(media) => Some(media.kind),
            _ => None,
        }
    }

    fn url(ext: &str) -> String {
        format!("{BASE}/1234567/wa/2026/11/30/original_0a1b2c3d4e5f.{ext}")
    }

    #[test]
    fn spec_020_verification_1_the_adapter_maps_each_extension_to_its_kind() {
        assert_eq!(kind(&url("ogg")), Some(MediaKind::Audio));
        assert_eq!(kind(&url("jpeg")), Some(MediaKind::Image));
        assert_eq!(kind(&url("jpg")), Some(MediaKind::Image));
        assert_eq!(kind(&url("PNG")), Some(MediaKind::Image));
        assert_eq!(kind(&url("mp4")), Some(MediaKind::Video));
        assert_eq!(kind(&url("3gp")), Some(MediaKind::Video));
        assert_eq!(kind(&url("pdf")), Some(MediaKind::Unsupported));
        assert_eq!(kind(&url("webp")), Some(MediaKind::Unsupported));
        // Surrounding whitespace is trimmed.
        assert_eq!(kind(&format!("  {}\n", url("ogg"))), Some(MediaKind::Audio));
    }

    #[test]
    fn spec_020_verification_1_a_url_in_a_sentence_another_host_or_plain_http_stays_text() {
        let in_sentence = format!("listen to this {}", url("ogg"));
        let other_host = url("ogg").replace("manybot-files.s3", "manybot-files.s3.evil.example");
        let lookalike = url("ogg").replace(
            BASE,
            "https://manybot-files.s3.eu-central-1.amazonaws.com.evil.example",
        );
        let userinfo = url("ogg").replace(
            "https://",
            "https://manybot-files.s3.eu-central-1.amazonaws.com@",
        );
        let plain_http = url("ogg").replace("https://", "http://");
        for text in [in_sentence, other_host, lookalike, userinfo, plain_http] {
            assert_eq!(kind(&text), None, "{text}");
        }
        assert!(matches!(
            detect("hello there", &MediaHost::default()),
            Detected::Text
        ));
        assert!(matches!(
            detect("https://example.com/page", &MediaHost::default()),
            Detected::Text
        ));
    }

    #[test]
    fn spec_020_verification_1_a_near_miss_is_reported_without_matching() {
        let host = MediaHost::default();
        let wrong_path = format!("{BASE}/1234567/ig/2026/11/30/original_0a1b.ogg");
        let plain_http = url("ogg").replace("https://", "http://");
        let other_host = url("ogg").replace(BASE, "https://files.example.test");
        for text in [wrong_path, plain_http, other_host] {
            assert!(matches!(detect(&text, &host), Detected::NearMiss), "{text}");
        }
    }

    #[test]
    fn spec_020_media_base_is_https_or_loopback_http_without_a_path() {
        assert!(MediaHost::parse(BASE).is_ok());
        assert!(MediaHost::parse("http://127.0.0.1:4010").is_ok());
        assert!(MediaHost::parse("http://localhost:4010").is_ok());
        assert!(MediaHost::parse("http://files.example.test").is_err());
        assert!(MediaHost::parse("https://files.example.test/prefix").is_err());
        assert!(MediaHost::parse("ftp://files.example.test").is_err());
        let local = MediaHost::parse("http://127.0.0.1:4010").unwrap();
        let text = "http://127.0.0.1:4010/42/wa/2026/01/02/original_ab.ogg";
        assert!(matches!(detect(text, &local), Detected::Media(_)));
        let other_port = "http://127.0.0.1:4011/42/wa/2026/01/02/original_ab.ogg";
        assert!(matches!(detect(other_port, &local), Detected::NearMiss));
    }
}
