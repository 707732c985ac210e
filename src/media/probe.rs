//! What a media file declares, read by the system's `ffprobe` before anything decodes it: its
//! duration (the longest of the container's and every stream's) and each video stream's size.
//!
//! The probe itself is bounded: one process under the media limits, the container named (`-f`)
//! so a crafted file cannot pick another demuxer, `-protocol_whitelist file` so it cannot make
//! ffprobe open anything else, one decoder thread, and `max_pixels` (the dimension limit
//! squared): a decoder the probe opens refuses an oversized picture before allocating it (a
//! 16000×16000 frame cost the probe 780 MB without it). Such a probe reports no size, or fails
//! saying so: either way a frame of unknown size, which counts as over the limit
//! (`MediaLimits::admit`). Any other failure is a file ffprobe cannot read: an error (020).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;

use super::limits::MediaLimits;
use super::process;
use super::{FallbackCause, MediaError};

/// What the probe learned of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The longest duration the file declares; `None` when it declares none.
    pub duration: Option<Duration>,
    pub has_audio: bool,
    /// Each video stream's width and height, `None` where the file does not say.
    pub frames: Vec<Option<(u32, u32)>>,
}

impl Probe {
    pub fn has_video(&self) -> bool {
        !self.frames.is_empty()
    }
}

/// The limits' verdict on a probe (beside the probe, so the limits know nothing of it).
impl MediaLimits {
    /// Whether a probed file may be decoded: every video stream's size known and within the
    /// limit (a size the probe could not tell counts as over it: the probe's `max_pixels` hides
    /// an oversized one), its duration known and within the limit. Otherwise the media
    /// fallback.
    pub fn admit(&self, probe: &Probe) -> Result<(), FallbackCause> {
        for frame in &probe.frames {
            let (width, height) = frame.ok_or(FallbackCause::FrameTooLarge)?;
            if width > self.max_dimension || height > self.max_dimension {
                return Err(FallbackCause::FrameTooLarge);
            }
        }
        let duration = probe.duration.ok_or(FallbackCause::Unmeasured)?;
        if duration > self.max_duration {
            return Err(FallbackCause::TooLong);
        }
        Ok(())
    }
}

/// Probes `input`, read as `container` (`mov` for MP4 and 3GP, `ogg` for a voice note).
pub async fn probe(
    ffprobe: &Path,
    input: &Path,
    container: &str,
    limits: &MediaLimits,
) -> Result<Probe, MediaError> {
    let mut command = process::command(ffprobe, limits);
    command
        .args(["-hide_banner", "-v", "error"])
        .args(["-protocol_whitelist", "file", "-threads", "1"])
        .args(["-f", container])
        .args(["-max_pixels", &limits.max_pixels().to_string()])
        .args([
            "-show_entries",
            "format=duration:stream=codec_type,width,height,duration",
            "-of",
            "json",
            "-i",
        ])
        .arg(input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = process::run(command, limits).await?;
    if !output.status.success() {
        // A picture over `max_pixels` the decoder refused: a frame of unknown size, over the
        // limit. Any other failure is a file ffprobe cannot read (020: an error).
        if String::from_utf8_lossy(&output.stderr).contains(MAX_PIXELS_REFUSAL) {
            return Ok(Probe {
                duration: None,
                has_audio: false,
                frames: vec![None],
            });
        }
        return Err(MediaError::Ffmpeg);
    }
    parse(&output.stdout).ok_or(MediaError::Ffmpeg)
}

/// What ffmpeg's libraries say when a picture exceeds `max_pixels`.
const MAX_PIXELS_REFUSAL: &str = "exceeds specified max pixel count";

#[derive(Deserialize)]
struct Listing {
    #[serde(default)]
    streams: Vec<Stream>,
    format: Option<Format>,
}

#[derive(Deserialize)]
struct Stream {
    #[serde(default)]
    codec_type: String,
    width: Option<u32>,
    height: Option<u32>,
    duration: Option<String>,
}

#[derive(Deserialize)]
struct Format {
    duration: Option<String>,
}

/// ffprobe's JSON listing as a [`Probe`]; `None` when it is not one, or names neither audio
/// nor video.
fn parse(json: &[u8]) -> Option<Probe> {
    let listing: Listing = serde_json::from_slice(json).ok()?;
    let declared = listing
        .format
        .and_then(|f| f.duration)
        .into_iter()
        .chain(listing.streams.iter().filter_map(|s| s.duration.clone()));
    let duration = declared.filter_map(|d| seconds(&d)).max();
    let frames: Vec<_> = listing
        .streams
        .iter()
        .filter(|s| s.codec_type == "video")
        .map(|s| s.width.zip(s.height))
        .collect();
    let has_audio = listing.streams.iter().any(|s| s.codec_type == "audio");
    (has_audio || !frames.is_empty()).then_some(Probe {
        duration,
        has_audio,
        frames,
    })
}

/// ffprobe's `"12.345000"` as a duration (`N/A`, negative or not a number is none).
fn seconds(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(1e9)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::process::tests::stand_in;

    /// The probe passes `max_pixels`, so a decoder it opens refuses an oversized picture before
    /// allocating it; and a probe that measured nothing counts the video's frame as over the
    /// limit.
    #[tokio::test]
    async fn the_probe_is_bounded_by_max_pixels_and_an_unmeasured_frame_is_over_the_limit() {
        let (_dir, program, seen) = stand_in(
            "ffprobe",
            "args",
            "echo \"$@\" > {note}\n\
             echo 'Picture size 16000x16000 exceeds specified max pixel count 1000000' >&2\n\
             exit 1",
        );
        let limits = MediaLimits {
            max_dimension: 1000,
            ..MediaLimits::default()
        };
        let probed = probe(&program, Path::new("/nonexistent.mp4"), "mov", &limits)
            .await
            .expect("a picture over max_pixels is a frame of unknown size");
        let args = std::fs::read_to_string(&seen).unwrap();
        assert!(args.contains("-max_pixels 1000000"), "{args}");
        assert_eq!(
            limits.admit(&probed),
            Err(super::super::FallbackCause::FrameTooLarge)
        );
    }

    #[test]
    fn the_probe_reads_the_longest_declared_duration_and_each_frame_size() {
        let listing = br#"{"programs":[],"streams":[
            {"codec_type":"video","width":160,"height":120,"duration":"2.000000"},
            {"codec_type":"audio","duration":"14400.000000"}],
            "format":{"duration":"2.000000"}}"#;
        assert_eq!(
            parse(listing),
            Some(Probe {
                duration: Some(Duration::from_secs(14_400)),
                has_audio: true,
                frames: vec![Some((160, 120))],
            })
        );
        let unmeasured = br#"{"streams":[{"codec_type":"video","duration":"N/A"}],"format":{}}"#;
        assert_eq!(
            parse(unmeasured),
            Some(Probe {
                duration: None,
                has_audio: false,
                frames: vec![None],
            })
        );
        assert_eq!(parse(br#"{"streams":[{"codec_type":"data"}]}"#), None);
        assert_eq!(parse(b"not json"), None);
    }
}
