//! Hostile media is bounded before it is decoded: each voice note and video is probed first and
//! refused over the limits with the media fallback (nothing decoded, nothing transcribed), and
//! the audio that is transcribed is cut to `MEDIA_MAX_AUDIO_SECONDS` and sent as compact Opus.
//! The hostile files are generated here by ffmpeg, small and cheap, with the limits set low.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;

use crate::helpers::*;
use crate::media::{Fakes, TRANSCRIPT, ffmpeg_required, media_fallback};

/// A file ffmpeg generates from `args` (lavfi sources) into `dir`, as bytes.
fn generate(dir: &Path, name: &str, args: &[&str]) -> Vec<u8> {
    let out = dir.join(name);
    let status = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostdin", "-loglevel", "error"])
        .args(args)
        .arg("-y")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "ffmpeg generated {name}");
    std::fs::read(out).unwrap()
}

/// An MP4 with one second of `size` video (one frame) and `seconds` of silence as its
/// soundtrack, at 8 kbit/s: the shape of a small file that decodes to a lot of audio.
fn video_with_silence(dir: &Path, size: &str, seconds: u32) -> Vec<u8> {
    let video = format!("color=size={size}:rate=1:duration=1");
    let audio = format!("anullsrc=r=8000:cl=mono:d={seconds}");
    generate(
        dir,
        "hostile.mp4",
        &[
            "-f",
            "lavfi",
            "-i",
            &video,
            "-f",
            "lavfi",
            "-i",
            &audio,
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-c:a",
            "aac",
            "-b:a",
            "8k",
            "-f",
            "mp4",
        ],
    )
}

/// A voice note of `seconds` of silence (Opus in Ogg, as WhatsApp records them).
fn voice_note(dir: &Path, seconds: u32) -> Vec<u8> {
    let audio = format!("anullsrc=r=16000:cl=mono:d={seconds}");
    generate(
        dir,
        "voice.ogg",
        &[
            "-f", "lavfi", "-i", &audio, "-c:a", "libopus", "-b:a", "8k", "-f", "ogg",
        ],
    )
}

/// The file part of a multipart upload named `name`: its bytes.
fn uploaded_file(body: &[u8], name: &str) -> Vec<u8> {
    let find = |haystack: &[u8], needle: &[u8]| {
        haystack
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap_or_else(|| panic!("{} in the upload", String::from_utf8_lossy(needle)))
    };
    let named = find(body, format!("filename=\"{name}\"").as_bytes());
    let start = named + find(&body[named..], b"\r\n\r\n") + 4;
    let end = body
        .windows(4)
        .rposition(|w| w == b"\r\n--")
        .expect("the closing boundary");
    body[start..end].to_vec()
}

/// What ffprobe reads of `bytes`: the duration in seconds and the first stream's codec.
fn measure(dir: &Path, bytes: &[u8]) -> (f64, String) {
    let path = dir.join("uploaded");
    std::fs::write(&path, bytes).unwrap();
    let output = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "format=duration:stream=codec_name",
        ])
        .args(["-of", "default=noprint_wrappers=1:nokey=1"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines = text.lines();
    let codec = lines.next().unwrap_or_default().to_owned();
    let seconds = lines
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    (seconds, codec)
}

/// The app with vision and transcription, the file served as `ext`, and `limits` set.
async fn app_for(
    fakes: &Fakes,
    ext: &str,
    content_type: &str,
    bytes: &[u8],
    vision: bool,
    limits: &[(&'static str, &str)],
) -> (TestApp, Arc<ScriptedModel>) {
    fakes.serve(ext, content_type, bytes).await;
    fakes.transcribe_as(TRANSCRIPT).await;
    let model = ScriptedModel::replies([reply_json("Happy to help.")]);
    let model = Arc::new(if vision { model.with_vision() } else { model });
    let mut options = fakes.options(model.clone(), true);
    for (name, value) in limits {
        options = options.env(name, *value);
    }
    (spawn_app_with(options).await, model)
}

/// The media fallback answered, without the model, and nothing sent to transcription.
async fn assert_refused(
    app: &TestApp,
    fakes: &Fakes,
    model: &ScriptedModel,
    ext: &str,
    subscriber: &str,
) {
    let (status, body) = app.send(subscriber, &fakes.url(ext)).await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![media_fallback(app)]);
    assert_eq!(model.calls(), 0, "the model does not run");
    assert!(
        fakes.transcriptions().await.is_empty(),
        "nothing is uploaded to transcription"
    );
    assert_eq!(
        fakes.file_requests().await,
        1,
        "downloaded once, to be probed"
    );
    let turns = app.turns(subscriber).await;
    assert_eq!(turns[1].outcome.as_deref(), Some("media_fallback"));
}

/// A video, as `(ext, content type)`.
const MP4: (&str, &str) = ("mp4", "video/mp4");
/// A voice note, as `(ext, content type)`.
const VOICE: (&str, &str) = ("ogg", "audio/ogg");

/// With ffmpeg on PATH: the file `make` writes in a scratch folder (kept for the test),
/// served as `(ext, content type)`, and the app under `limits` (`vision`: a model that sees
/// images).
async fn hostile_app(
    make: impl FnOnce(&Path) -> Vec<u8>,
    (ext, content_type): (&str, &str),
    vision: bool,
    limits: &[(&'static str, &str)],
) -> (tempfile::TempDir, Fakes, TestApp, Arc<ScriptedModel>) {
    ffmpeg_required();
    let dir = tempfile::tempdir().unwrap();
    let fakes = Fakes::start().await;
    let file = make(dir.path());
    let (app, model) = app_for(&fakes, ext, content_type, &file, vision, limits).await;
    (dir, fakes, app, model)
}

/// Each file over a limit is refused with the fallback: a frame over `MEDIA_MAX_DIMENSION`
/// (before decoding), and a video whose soundtrack or a voice note over
/// `MEDIA_MAX_DURATION_SECONDS` (one second of picture, a minute of silence: the soundtrack's
/// length counts).
#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn hostile_media_each_file_over_a_limit_is_refused_with_the_fallback() {
    // How the file is made, its kind, whether the model sees images, the limit it is over,
    // and the contact.
    type Case = (
        fn(&Path) -> Vec<u8>,
        (&'static str, &'static str),
        bool,
        (&'static str, &'static str),
        &'static str,
    );
    let cases: [Case; 3] = [
        (
            |dir| video_with_silence(dir, "1280x720", 1),
            MP4,
            true,
            ("MEDIA_MAX_DIMENSION", "640"),
            "4101",
        ),
        (
            |dir| video_with_silence(dir, "64x64", 60),
            MP4,
            true,
            ("MEDIA_MAX_DURATION_SECONDS", "30"),
            "4102",
        ),
        (
            |dir| voice_note(dir, 20),
            VOICE,
            false,
            ("MEDIA_MAX_DURATION_SECONDS", "10"),
            "4103",
        ),
    ];
    for (make, kind, vision, limit, subscriber) in cases {
        let (_dir, fakes, app, model) = hostile_app(make, kind, vision, &[limit]).await;
        assert_refused(&app, &fakes, &model, kind.0, subscriber).await;
    }
}

/// The one clip the fake transcription server received: its file name, duration and codec,
/// and its size.
async fn the_upload(fakes: &Fakes, dir: &Path) -> (f64, String, usize) {
    let uploads = fakes.transcriptions().await;
    assert_eq!(uploads.len(), 1, "one clip uploaded");
    let clip = uploaded_file(&uploads[0].body, "audio.ogg");
    let (seconds, codec) = measure(dir, &clip);
    (seconds, codec, clip.len())
}

/// The app under `MEDIA_MAX_AUDIO_SECONDS=3` (no vision) answered `subscriber`'s long clip
/// (made by `make`, of `kind`): the clip uploaded for transcription is cut to 3 s of opus. The
/// app, its model and the clip's size.
async fn cut_to_three_seconds_of_opus(
    make: impl FnOnce(&Path) -> Vec<u8>,
    kind: (&str, &str),
    subscriber: &str,
) -> (TestApp, Arc<ScriptedModel>, usize) {
    let limits = [("MEDIA_MAX_AUDIO_SECONDS", "3")];
    let (dir, fakes, app, model) = hostile_app(make, kind, false, &limits).await;
    let (_, body) = app.send(subscriber, &fakes.url(kind.0)).await;
    assert_eq!(block_texts(&body), vec!["Happy to help."]);
    let (seconds, codec, len) = the_upload(&fakes, dir.path()).await;
    assert!(seconds <= 3.05, "cut to 3 s, got {seconds} s");
    assert_eq!(codec, "opus");
    (app, model, len)
}

#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn hostile_media_a_long_soundtrack_is_cut_to_the_audio_limit_and_sent_as_compact_opus() {
    let make = |dir: &Path| video_with_silence(dir, "64x64", 60);
    let (app, model, len) = cut_to_three_seconds_of_opus(make, MP4, "4104").await;
    assert_eq!(model.calls(), 1);
    // 3 s at 24 kbit/s is 9 KB; the minute as 16-bit WAV would be 1.9 MB.
    assert!(len < 16 * 1024, "{len} bytes");
    assert_eq!(app.turns("4104").await[0].text, TRANSCRIPT);
}

#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn hostile_media_a_voice_note_longer_than_the_audio_limit_is_cut_to_it() {
    cut_to_three_seconds_of_opus(|dir| voice_note(dir, 20), VOICE, "4105").await;
}
