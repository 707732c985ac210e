//! A video split by the system's `ffmpeg` (020): at most four frames, one at the middle of each
//! quarter, the longest side at most 768 px and never enlarged, and the soundtrack as 16 kHz
//! mono WAV for the transcriber.
//!
//! The video is read from a file in the turn's private directory, not a pipe (an MP4 whose
//! `moov` atom follows the data cannot be read from a pipe), as `-f mov` (MP4 and 3GP), with
//! `-protocol_whitelist file` so a crafted file cannot make ffmpeg open anything else. Every
//! child is killed when its future is dropped: the turn's abort ends it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::MediaError;

/// At most this many frames of a video reach the model.
pub const MAX_FRAMES: usize = 4;
/// The longest side of a frame, in pixels (smaller frames keep their size).
pub const MAX_FRAME_SIDE: u32 = 768;

/// The system's ffmpeg.
#[derive(Debug, Clone)]
pub struct Ffmpeg {
    program: PathBuf,
}

/// What the probe learned of a video.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    pub duration: Option<Duration>,
    pub has_video: bool,
    pub has_audio: bool,
}

impl Ffmpeg {
    /// `ffmpeg` on `PATH`, if there is one.
    pub fn find() -> Option<Self> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join("ffmpeg"))
            .find(|candidate| candidate.is_file())
            .map(|program| Self { program })
    }

    /// A given program (tests point this at a missing one).
    pub fn at(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
        }
    }

    fn command(&self, input: &Path) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(["-hide_banner", "-nostdin", "-protocol_whitelist", "file"])
            .args(["-f", "mov", "-i"])
            .arg(input)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Reads the container's duration and streams (ffmpeg with no output prints them, then
    /// exits non-zero because no output was named: the listing is what counts).
    pub async fn probe(&self, input: &Path) -> Result<Probe, MediaError> {
        let output = self
            .command(input)
            .output()
            .await
            .map_err(|_| MediaError::Ffmpeg)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        parse_probe(&stderr).ok_or(MediaError::Ffmpeg)
    }

    /// Up to four frames, one at the middle of each quarter, as PNG files in `dir`.
    pub async fn frames(
        &self,
        input: &Path,
        dir: &Path,
        probe: &Probe,
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
            let mut command = Command::new(&self.program);
            command
                .args(["-hide_banner", "-nostdin", "-loglevel", "error"])
                .args(["-protocol_whitelist", "file"])
                .args(["-ss", &format!("{:.3}", at.as_secs_f64())])
                .args(["-f", "mov", "-i"])
                .arg(input)
                .args([
                    "-frames:v",
                    "1",
                    "-vf",
                    &scale,
                    "-f",
                    "image2",
                    "-c:v",
                    "png",
                    "-y",
                ])
                .arg(&out)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true);
            let status = command.status().await.map_err(|_| MediaError::Ffmpeg)?;
            if !status.success() {
                return Err(MediaError::Ffmpeg);
            }
            // A seek past the last frame writes nothing: that quarter has no frame.
            if tokio::fs::metadata(&out).await.is_ok_and(|m| m.len() > 0) {
                frames.push(out);
            }
        }
        Ok(frames)
    }

    /// The soundtrack as 16 kHz mono WAV in `dir`.
    pub async fn soundtrack(&self, input: &Path, dir: &Path) -> Result<PathBuf, MediaError> {
        let out = dir.join("soundtrack.wav");
        let status = Command::new(&self.program)
            .args(["-hide_banner", "-nostdin", "-loglevel", "error"])
            .args(["-protocol_whitelist", "file", "-f", "mov", "-i"])
            .arg(input)
            .args([
                "-vn",
                "-ac",
                "1",
                "-ar",
                "16000",
                "-c:a",
                "pcm_s16le",
                "-f",
                "wav",
                "-y",
            ])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .status()
            .await
            .map_err(|_| MediaError::Ffmpeg)?;
        if !status.success() {
            return Err(MediaError::Ffmpeg);
        }
        Ok(out)
    }
}

/// The duration and streams from ffmpeg's input listing; `None` when it could not read the
/// input at all.
fn parse_probe(listing: &str) -> Option<Probe> {
    let mut probe = Probe {
        duration: None,
        has_video: false,
        has_audio: false,
    };
    let mut read = false;
    for line in listing.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Duration: ") {
            read = true;
            probe.duration = rest.split(',').next().and_then(parse_clock);
        } else if line.starts_with("Stream #") {
            probe.has_video |= line.contains(": Video:");
            probe.has_audio |= line.contains(": Audio:");
        }
    }
    (read && (probe.has_video || probe.has_audio)).then_some(probe)
}

/// `HH:MM:SS.cc` as a duration (`N/A` is none).
fn parse_clock(text: &str) -> Option<Duration> {
    let mut parts = text.trim().split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    let total = hours * 3600.0 + minutes * 60.0 + seconds;
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether process `pid` has ended (gone, or a zombie awaiting its reaper).
    fn ended(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    /// A few real milliseconds on a blocking thread (the child runs in real time).
    async fn pause() {
        let _ = tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(5))).await;
    }

    #[tokio::test]
    async fn spec_020_ffmpeg_is_killed_when_the_turn_drops_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // A stand-in for an ffmpeg that never finishes: it notes its pid, then waits forever.
        let program = dir.path().join("ffmpeg");
        std::fs::write(
            &program,
            format!(
                "#!/bin/sh\necho $$ > '{}'\nexec sleep 600\n",
                pid_file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o700)).unwrap();
        let ffmpeg = Ffmpeg::at(&program);
        let input = dir.path().join("video");
        std::fs::write(&input, b"x").unwrap();

        // The turn's abort: the probe is dropped once the child is running.
        let pid = tokio::select! {
            _ = ffmpeg.probe(&input) => panic!("the stand-in never finishes"),
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

    #[test]
    fn the_probe_reads_duration_and_streams() {
        let listing = "Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'x':\n  Duration: 00:00:02.50, start: 0.000000, bitrate: 90 kb/s\n  Stream #0:0[0x1](und): Video: h264, yuv420p, 320x240\n  Stream #0:1[0x2](und): Audio: aac, 16000 Hz, mono\nAt least one output file must be specified";
        assert_eq!(
            parse_probe(listing),
            Some(Probe {
                duration: Some(Duration::from_millis(2500)),
                has_video: true,
                has_audio: true
            })
        );
        assert_eq!(
            parse_probe("x: Invalid data found when processing input"),
            None
        );
    }
}
