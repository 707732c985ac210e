//! The system's `ffmpeg` and `ffprobe` (020): a file probed before anything decodes it
//! ([`probe`](super::probe)), then at most four frames of a video, one at the middle of each
//! quarter, the longest side at most 768 px and never enlarged, and the audio (a video's
//! soundtrack, or a voice note longer than the audio limit) cut to `MEDIA_MAX_AUDIO_SECONDS`
//! and encoded compactly, as 16 kHz mono Opus in Ogg, for the transcriber.
//!
//! The input is read from a file in the turn's private directory, not a pipe (an MP4 whose
//! `moov` atom follows the data cannot be read from a pipe), as the container its kind names
//! (`-f mov` for MP4 and 3GP, `-f ogg` for a voice note), with `-protocol_whitelist file` so a
//! crafted file cannot make ffmpeg open anything else, one decoder thread and `max_pixels`.
//! Every process runs under the media limits ([`process`](super::process)) and is killed when
//! its future is dropped: the turn's abort ends it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use super::MediaError;
use super::limits::MediaLimits;
use super::probe::{self, Probe};
use super::process;

/// At most this many frames of a video reach the model.
pub const MAX_FRAMES: usize = 4;
/// The longest side of a frame, in pixels (smaller frames keep their size).
pub const MAX_FRAME_SIDE: u32 = 768;
/// The extracted audio: Opus at this bitrate (speech), 16 kHz mono, in Ogg.
pub const AUDIO_BITRATE: &str = "24k";

/// The system's ffmpeg and ffprobe.
#[derive(Debug, Clone)]
pub struct Ffmpeg {
    ffmpeg: PathBuf,
    ffprobe: PathBuf,
}

impl Ffmpeg {
    /// `ffmpeg` and `ffprobe` on `PATH`, if both are there.
    pub fn find() -> Option<Self> {
        let path = std::env::var_os("PATH")?;
        let find = |name: &str| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        };
        Some(Self {
            ffmpeg: find("ffmpeg")?,
            ffprobe: find("ffprobe")?,
        })
    }

    /// Given programs (tests point these at stand-ins).
    pub fn at(ffmpeg: impl Into<PathBuf>, ffprobe: impl Into<PathBuf>) -> Self {
        Self {
            ffmpeg: ffmpeg.into(),
            ffprobe: ffprobe.into(),
        }
    }

    /// The ffprobe this uses.
    pub fn ffprobe_path(&self) -> &Path {
        &self.ffprobe
    }

    /// What `input`, read as `container`, declares ([`probe::probe`]).
    pub async fn probe(
        &self,
        input: &Path,
        container: &str,
        limits: &MediaLimits,
    ) -> Result<Probe, MediaError> {
        probe::probe(&self.ffprobe, input, container, limits).await
    }

    /// ffmpeg reading `input` as `container`, bounded, from `at` when given.
    fn reading(
        &self,
        input: &Path,
        container: &str,
        at: Option<Duration>,
        limits: &MediaLimits,
    ) -> Command {
        let mut command = process::command(&self.ffmpeg, limits);
        command
            .args(["-hide_banner", "-nostdin", "-loglevel", "error"])
            .args(["-protocol_whitelist", "file", "-threads", "1"])
            .args(["-max_pixels", &limits.max_pixels().to_string()]);
        if let Some(at) = at {
            command.args(["-ss", &format!("{:.3}", at.as_secs_f64())]);
        }
        command.args(["-f", container, "-i"]).arg(input);
        command
    }

    /// Up to four frames of a video, one at the middle of each quarter, as PNG files in `dir`.
    pub async fn frames(
        &self,
        input: &Path,
        dir: &Path,
        probe: &Probe,
        limits: &MediaLimits,
    ) -> Result<Vec<PathBuf>, MediaError> {
        let times: Vec<Duration> = match probe.duration {
            Some(duration) if !duration.is_zero() => (0..MAX_FRAMES as u32)
                .map(|quarter| duration.mul_f64(f64::from(2 * quarter + 1) / 8.0))
                .collect(),
            _ => vec![Duration::ZERO],
        };
        let scale = format!(
            "scale=w='min({MAX_FRAME_SIDE},iw)':h='min({MAX_FRAME_SIDE},ih)':\
             force_original_aspect_ratio=decrease"
        );
        let mut frames = Vec::new();
        for (index, at) in times.into_iter().enumerate() {
            let out = dir.join(format!("frame-{index}.png"));
            let mut command = self.reading(input, "mov", Some(at), limits);
            command
                .args(["-filter_threads", "1", "-frames:v", "1", "-vf", &scale])
                .args(["-f", "image2", "-c:v", "png", "-y"])
                .arg(&out);
            let output = process::run(command, limits).await?;
            if !output.status.success() {
                return Err(MediaError::Ffmpeg);
            }
            // A seek past the last frame writes nothing: that quarter has no frame.
            if tokio::fs::metadata(&out).await.is_ok_and(|m| m.len() > 0) {
                frames.push(out);
            }
        }
        Ok(frames)
    }

    /// The audio of `input` (read as `container`), at most `limits.max_audio` of it, as 16 kHz
    /// mono Opus in Ogg in `dir`.
    pub async fn audio(
        &self,
        input: &Path,
        container: &str,
        dir: &Path,
        limits: &MediaLimits,
    ) -> Result<PathBuf, MediaError> {
        let out = dir.join("audio.ogg");
        let mut command = self.reading(input, container, None, limits);
        command
            .args(["-t", &format!("{:.3}", limits.max_audio.as_secs_f64())])
            .args(["-vn", "-sn", "-dn", "-ac", "1", "-ar", "16000"])
            .args([
                "-c:a",
                "libopus",
                "-b:a",
                AUDIO_BITRATE,
                "-application",
                "voip",
            ])
            .args(["-f", "ogg", "-y"])
            .arg(&out);
        let output = process::run(command, limits).await?;
        if !output.status.success() {
            return Err(MediaError::Ffmpeg);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::process::tests::{ended, pause, stand_in};

    #[tokio::test]
    async fn spec_020_ffmpeg_is_killed_when_the_turn_drops_it() {
        // A stand-in for an ffprobe that never finishes: it notes its pid, then waits forever.
        let (dir, program, pid_file) =
            stand_in("ffprobe", "pid", "echo $$ > '{note}'\nexec sleep 600");
        let ffmpeg = Ffmpeg::at(dir.path().join("ffmpeg"), &program);
        let input = dir.path().join("video");
        std::fs::write(&input, b"x").unwrap();
        let limits = MediaLimits::default();

        // The turn's abort: the probe is dropped once the child is running.
        let pid = tokio::select! {
            _ = ffmpeg.probe(&input, "mov", &limits) => panic!("the stand-in never finishes"),
            pid = async {
                loop {
                    if let Ok(pid) = std::fs::read_to_string(&pid_file)
                        && !pid.trim().is_empty()
                    {
                        break pid.trim().to_owned();
                    }
                    pause().await;
                }
            } => pid,
        };
        for _ in 0..400 {
            if ended(&pid) {
                return;
            }
            pause().await;
        }
        panic!("ffmpeg outlived the turn that dropped it");
    }
}
