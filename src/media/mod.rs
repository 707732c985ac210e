//! Inbound media (spec 020): a voice note, an image or a video the contact sent, answered
//! instead of dropped.
//!
//! - [`detect`]: which inbound `text` is ManyChat's media URL, and of which kind (called by the
//!   ManyChat adapter only, `http::inbound`).
//! - [`download`]: the bounded fetch from the media host into the turn's private directory.
//! - [`probe`]: what a voice note or video declares (duration, frame sizes), read by ffprobe
//!   before anything decodes it; [`limits`] refuses what is over the limits (the fallback) and
//!   holds the job slots; [`process`] bounds each ffmpeg/ffprobe process.
//! - [`video`]: frames and audio by the system's ffmpeg, audio cut to the limit.
//! - Transcription is the model registry's (`model::transcription`, C2): this module only calls
//!   the `Transcriber` it is given.
//! - [`MediaService::prepare`]: the one call a turn makes, inside its race, turning the media
//!   into what the model reads ([`MediaText`]), a fallback, or a failure.
//!
//! Invariants: the media URL is never stored or logged (the turn records a marker, then the
//! transcript; `MediaRef`'s `Debug` shows only the kind); bytes live in a private temporary
//! directory removed when the call ends or is dropped; every step is cancelled by dropping the
//! future (the turn's deadline and abort), ffmpeg children included; at most
//! `MEDIA_MAX_JOBS` media messages are read at once; with ffmpeg installed, nothing is decoded
//! or transcribed before the probe admits it.

pub mod detect;
pub mod download;
pub mod limits;
pub mod probe;
mod process;
pub mod video;

use std::sync::Arc;

use reqwest::Url;

pub use detect::{DEFAULT_MEDIA_BASE, Detected, InvalidMediaBase, MediaHost, detect};
use limits::JobSlots;
pub use limits::MediaLimits;
use video::Ffmpeg;

use crate::model::ImageInput;
use crate::model::transcription::{AudioClip, Transcriber};

/// What a media message is, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Audio,
    Image,
    Video,
    Unsupported,
}

impl MediaKind {
    /// `.ogg` → audio; `.jpeg`/`.jpg`/`.png` → image; `.mp4`/`.3gp` → video; else unsupported.
    pub fn of_extension(extension: &str) -> Self {
        match extension {
            "ogg" => Self::Audio,
            "jpeg" | "jpg" | "png" => Self::Image,
            "mp4" | "3gp" => Self::Video,
            _ => Self::Unsupported,
        }
    }

    /// `turns.media_kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Audio => "audio",
            Self::Image => "image",
            Self::Video => "video",
            Self::Unsupported => "unsupported",
        }
    }

    /// What the turn records until (and unless) a transcript replaces it.
    pub fn marker(self) -> &'static str {
        match self {
            Self::Audio => "[voice note]",
            Self::Image => "[image]",
            Self::Video => "[video]",
            Self::Unsupported => "[media]",
        }
    }

    fn content_type_prefix(self) -> &'static str {
        match self {
            Self::Audio => "audio/",
            Self::Image => "image/",
            Self::Video => "video/",
            Self::Unsupported => "\0",
        }
    }

    fn file_extension(self) -> &'static str {
        match self {
            Self::Audio => "ogg",
            Self::Image => "img",
            Self::Video => "video",
            Self::Unsupported => "bin",
        }
    }
}

/// A detected media message: its kind and where ManyChat keeps it. The URL is never stored or
/// logged; `Debug` shows the kind only.
#[derive(Clone, PartialEq, Eq)]
pub struct MediaRef {
    pub kind: MediaKind,
    url: Url,
}

impl std::fmt::Debug for MediaRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaRef")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Why media could not be answered, though nothing failed: the turn takes
/// `rules.messages.mediaFallback` (or the escalation copy without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackCause {
    UnsupportedKind,
    NoTranscription,
    EmptyTranscript,
    NoVision,
    /// A video for a deployment with neither image input nor transcription.
    NeitherHalf,
    NoFfmpeg,
    /// The probe found a duration over `MEDIA_MAX_DURATION_SECONDS`.
    TooLong,
    /// The probe found a video stream over `MEDIA_MAX_DIMENSION`, or could not tell its size.
    FrameTooLarge,
    /// The file declares no duration: it cannot be bounded (a video stream without a size is
    /// `FrameTooLarge`).
    Unmeasured,
}

impl FallbackCause {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnsupportedKind => "unsupported_kind",
            Self::NoTranscription => "no_transcription_model",
            Self::EmptyTranscript => "empty_transcript",
            Self::NoVision => "model_without_vision",
            Self::NeitherHalf => "video_without_frames_or_transcript",
            Self::NoFfmpeg => "no_ffmpeg",
            Self::TooLong => "over_duration_limit",
            Self::FrameTooLarge => "over_dimension_limit",
            Self::Unmeasured => "unmeasured",
        }
    }
}

/// Why media failed: the turn escalates with outcome `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    #[error("media download failed")]
    Download,
    #[error("media host answered with a redirect")]
    Redirect,
    #[error("media Content-Type does not match its kind")]
    ContentType,
    #[error("media exceeds its size limit")]
    TooLarge,
    #[error("transcription failed")]
    Transcription,
    #[error("ffmpeg failed")]
    Ffmpeg,
    #[error("ffmpeg ran past its time limit")]
    Timeout,
}

impl MediaError {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Download => "download",
            Self::Redirect => "redirect",
            Self::ContentType => "content_type",
            Self::TooLarge => "too_large",
            Self::Transcription => "transcription",
            Self::Ffmpeg => "ffmpeg",
            Self::Timeout => "ffmpeg_timeout",
        }
    }
}

/// What the model reads in place of the media.
#[derive(Debug, Clone)]
pub struct MediaText {
    /// The transcript, or the marker when there is none (an image, a silent video).
    pub text: String,
    /// Images for the model (an image, a video's frames); given once, never stored.
    pub images: Vec<ImageInput>,
    /// `text` is a transcript: the model is told so (it confirms names and numbers), and the
    /// escalation keywords are checked against it.
    pub transcribed: bool,
    /// What the transcription cost, charged to the day's budget.
    pub cost_usd: f64,
}

/// What [`MediaService::prepare`] decided.
#[derive(Debug)]
pub enum Prepared {
    Ready(MediaText),
    Fallback(FallbackCause),
    Failed(MediaError),
}

/// What the media pipeline is given at start.
#[derive(Clone, Default)]
pub struct MediaSettings {
    /// `MANYCHAT_MEDIA_BASE`.
    pub host: MediaHost,
    /// `TRANSCRIPTION_MODEL`, resolved by the model registry; `None` when unset.
    pub transcriber: Option<Arc<dyn Transcriber>>,
    /// The system's ffmpeg and ffprobe; `None` when they are not installed (videos then take
    /// the fallback, voice notes go unprobed within their download size).
    pub ffmpeg: Option<Ffmpeg>,
    /// The `MEDIA_*` limits.
    pub limits: MediaLimits,
}

impl std::fmt::Debug for MediaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaSettings")
            .field("host", &self.host)
            .field("transcriber", &self.transcriber.as_ref().map(|t| t.id()))
            .field("ffmpeg", &self.ffmpeg.is_some())
            .field("limits", &self.limits)
            .finish()
    }
}

/// The media pipeline a turn calls.
#[derive(Clone)]
pub struct MediaService {
    settings: MediaSettings,
    http: reqwest::Client,
    jobs: JobSlots,
}

impl MediaService {
    pub fn new(settings: MediaSettings) -> Self {
        Self {
            jobs: JobSlots::new(settings.limits.max_jobs),
            settings,
            http: download::client(),
        }
    }

    /// The host media is detected on (the adapter asks).
    pub fn host(&self) -> &MediaHost {
        &self.settings.host
    }

    /// Turns a media message into what the model reads, or a fallback, or a failure.
    /// `vision`: whether the turn's model takes images. Cancelled by dropping the future.
    pub async fn prepare(&self, media: &MediaRef, vision: bool) -> Prepared {
        match self.prepare_kind(media, vision).await {
            Ok(prepared) => prepared,
            Err(error) => Prepared::Failed(error),
        }
    }

    async fn prepare_kind(&self, media: &MediaRef, vision: bool) -> Result<Prepared, MediaError> {
        let transcriber = self.settings.transcriber.as_deref();
        // Decided before anything is fetched: what cannot be answered is never downloaded.
        let fallback = match media.kind {
            MediaKind::Unsupported => Some(FallbackCause::UnsupportedKind),
            MediaKind::Audio if transcriber.is_none() => Some(FallbackCause::NoTranscription),
            MediaKind::Image if !vision => Some(FallbackCause::NoVision),
            MediaKind::Video if !vision && transcriber.is_none() => {
                Some(FallbackCause::NeitherHalf)
            }
            MediaKind::Video if self.settings.ffmpeg.is_none() => Some(FallbackCause::NoFfmpeg),
            _ => None,
        };
        if let Some(cause) = fallback {
            return Ok(Prepared::Fallback(cause));
        }
        // One of `MEDIA_MAX_JOBS` slots, held from the download to the transcript.
        let _slot = self.jobs.acquire().await;
        let dir = private_workdir().map_err(|_| MediaError::Download)?;
        let limit = download::size_limit(media.kind);
        let file = download::fetch(&self.http, media, limit, dir.path()).await?;
        match media.kind {
            MediaKind::Audio => {
                let transcriber = transcriber.expect("checked above");
                let clip = match self.voice_note(&file, dir.path()).await? {
                    Ok(clip) => clip,
                    Err(cause) => return Ok(Prepared::Fallback(cause)),
                };
                let transcript = transcriber
                    .transcribe(clip)
                    .await
                    .map_err(|_| MediaError::Transcription)?;
                if transcript.text.trim().is_empty() {
                    return Ok(Prepared::Fallback(FallbackCause::EmptyTranscript));
                }
                Ok(Prepared::Ready(MediaText {
                    text: transcript.text,
                    images: Vec::new(),
                    transcribed: true,
                    cost_usd: transcript.cost_usd,
                }))
            }
            MediaKind::Image => {
                let media_type = match file.media_type.as_str() {
                    "image/png" => "image/png",
                    "image/gif" => "image/gif",
                    "image/webp" => "image/webp",
                    _ => "image/jpeg",
                };
                Ok(Prepared::Ready(MediaText {
                    text: MediaKind::Image.marker().to_owned(),
                    images: vec![ImageInput {
                        media_type,
                        bytes: read(&file.path).await?,
                    }],
                    transcribed: false,
                    cost_usd: 0.0,
                }))
            }
            MediaKind::Video => {
                let ffmpeg = self.settings.ffmpeg.as_ref().expect("checked above");
                self.split_video(ffmpeg, &file.path, dir.path(), vision, transcriber)
                    .await
            }
            MediaKind::Unsupported => unreachable!("takes the fallback above"),
        }
    }

    /// The clip a voice note is transcribed from. With ffmpeg: probed first (over the limits,
    /// the fallback), and cut to `MEDIA_MAX_AUDIO_SECONDS` when longer; the file as downloaded
    /// otherwise (WhatsApp's own Opus), its cost estimated from its size.
    async fn voice_note(
        &self,
        file: &download::Downloaded,
        dir: &std::path::Path,
    ) -> Result<Result<AudioClip, FallbackCause>, MediaError> {
        let as_sent = AudioClip {
            path: file.path.clone(),
            len: file.len,
            file_name: "voice-note.ogg",
            media_type: "audio/ogg",
            duration: None,
        };
        let Some(ffmpeg) = self.settings.ffmpeg.as_ref() else {
            return Ok(Ok(as_sent));
        };
        let limits = &self.settings.limits;
        let probe = ffmpeg.probe(&file.path, "ogg", limits).await?;
        if let Err(cause) = limits.admit(&probe) {
            return Ok(Err(cause));
        }
        if !probe.has_audio {
            return Err(MediaError::Ffmpeg);
        }
        if probe.duration.is_some_and(|d| d <= limits.max_audio) {
            return Ok(Ok(as_sent));
        }
        self.cut_audio(ffmpeg, &file.path, "ogg", dir, &probe)
            .await
            .map(Ok)
    }

    /// The audio of `input`, cut to `MEDIA_MAX_AUDIO_SECONDS` and encoded compactly.
    async fn cut_audio(
        &self,
        ffmpeg: &Ffmpeg,
        input: &std::path::Path,
        container: &str,
        dir: &std::path::Path,
        probe: &probe::Probe,
    ) -> Result<AudioClip, MediaError> {
        let limits = &self.settings.limits;
        let path = ffmpeg.audio(input, container, dir, limits).await?;
        let len = tokio::fs::metadata(&path)
            .await
            .map_err(|_| MediaError::Ffmpeg)?
            .len();
        let duration = probe
            .duration
            .map_or(limits.max_audio, |d| d.min(limits.max_audio));
        Ok(AudioClip {
            path,
            len,
            file_name: "audio.ogg",
            media_type: "audio/ogg",
            duration: Some(duration),
        })
    }

    /// The degradation table: frames and transcript, frames only, transcript only, or the
    /// fallback when neither yields anything. Probed first: over the limits, the fallback.
    async fn split_video(
        &self,
        ffmpeg: &Ffmpeg,
        input: &std::path::Path,
        dir: &std::path::Path,
        vision: bool,
        transcriber: Option<&dyn Transcriber>,
    ) -> Result<Prepared, MediaError> {
        let limits = &self.settings.limits;
        let probe = ffmpeg.probe(input, "mov", limits).await?;
        if let Err(cause) = limits.admit(&probe) {
            return Ok(Prepared::Fallback(cause));
        }
        let mut images = Vec::new();
        if vision && probe.has_video() {
            for frame in ffmpeg.frames(input, dir, &probe, limits).await? {
                images.push(ImageInput {
                    media_type: "image/png",
                    bytes: read(&frame).await?,
                });
            }
        }
        let mut transcript = None;
        if let Some(transcriber) = transcriber
            && probe.has_audio
        {
            let clip = self.cut_audio(ffmpeg, input, "mov", dir, &probe).await?;
            transcript = Some(
                transcriber
                    .transcribe(clip)
                    .await
                    .map_err(|_| MediaError::Transcription)?,
            )
            .filter(|t| !t.text.trim().is_empty());
        }
        if images.is_empty() && transcript.is_none() {
            return Ok(Prepared::Fallback(FallbackCause::EmptyTranscript));
        }
        let cost_usd = transcript.as_ref().map_or(0.0, |t| t.cost_usd);
        Ok(Prepared::Ready(match transcript {
            Some(transcript) => MediaText {
                text: transcript.text,
                images,
                transcribed: true,
                cost_usd,
            },
            None => MediaText {
                text: MediaKind::Video.marker().to_owned(),
                images,
                transcribed: false,
                cost_usd,
            },
        }))
    }
}

async fn read(path: &std::path::Path) -> Result<Arc<[u8]>, MediaError> {
    tokio::fs::read(path)
        .await
        .map(Arc::from)
        .map_err(|_| MediaError::Download)
}

/// A turn's media folder: readable by the service's user alone (0700, its files 0600, see
/// `download::fetch`), whatever the process's umask; removed when dropped. A contact's voice
/// note or photo is never readable by another local user while it is processed.
pub(crate) fn private_workdir() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("manychat-media-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_contacts_media_is_private_on_disk_folder_0700_file_0600() {
        use std::os::unix::fs::PermissionsExt;
        use wiremock::matchers::method;
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_raw(b"\xff\xd8\xff\xe0photo".to_vec(), "image/jpeg"),
            )
            .mount(&server)
            .await;
        let dir = private_workdir().unwrap();
        let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode(dir.path()) & 0o777, 0o700);
        let media = MediaRef {
            kind: MediaKind::Image,
            url: Url::parse(&format!("{}/photo.jpg", server.uri())).unwrap(),
        };
        let file = download::fetch(&download::client(), &media, 1024, dir.path())
            .await
            .unwrap();
        assert_eq!(mode(&file.path) & 0o777, 0o600);
    }

    fn media(kind: MediaKind) -> MediaRef {
        // Port 9 (discard): any attempt to fetch would fail, so a fallback proves nothing was.
        let url = Url::parse("http://127.0.0.1:9/1/wa/2026/01/01/original_ab.x").unwrap();
        MediaRef { kind, url }
    }

    #[tokio::test]
    async fn spec_020_verification_6_what_cannot_be_answered_falls_back_before_any_download() {
        let service = MediaService::new(MediaSettings::default());
        let cases = [
            (MediaKind::Unsupported, true, FallbackCause::UnsupportedKind),
            (MediaKind::Audio, true, FallbackCause::NoTranscription),
            (MediaKind::Image, false, FallbackCause::NoVision),
            (MediaKind::Video, false, FallbackCause::NeitherHalf),
            // Vision but no ffmpeg on this deployment.
            (MediaKind::Video, true, FallbackCause::NoFfmpeg),
        ];
        for (kind, vision, cause) in cases {
            match service.prepare(&media(kind), vision).await {
                Prepared::Fallback(got) => assert_eq!(got, cause, "{kind:?}"),
                other => panic!("{kind:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn spec_020_markers_and_kinds() {
        assert_eq!(MediaKind::Audio.marker(), "[voice note]");
        assert_eq!(MediaKind::Image.marker(), "[image]");
        assert_eq!(MediaKind::Video.marker(), "[video]");
        assert_eq!(MediaKind::Unsupported.marker(), "[media]");
        let debug = format!("{:?}", media(MediaKind::Audio));
        assert!(!debug.contains("original_"), "{debug}");
    }
}
