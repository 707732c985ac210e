//! Spec 020: the contact's voice notes, images and videos answered, not dropped. The media
//! arrives as a file URL on a fake file host (wiremock, `MANYCHAT_MEDIA_BASE`); speech goes to a
//! fake OpenAI-compatible transcription server; the fixtures under `tests/fixtures/media/` are
//! real, tiny files (a tone, colour bars, a test pattern; no voice).

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};
use manychat_agent::model::{Message, ModelRequest};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::helpers::*;
use crate::selling::{edit_rules, from_messages, user_text};

const OGG: &[u8] = include_bytes!("../fixtures/media/tone.ogg");
const PNG: &[u8] = include_bytes!("../fixtures/media/colour-bars.png");
const MP4_WITH_SOUND: &[u8] = include_bytes!("../fixtures/media/clip-with-sound.mp4");
/// 1280×720, no soundtrack, `moov` after the data (unreadable from a pipe).
pub(crate) const MP4_WIDE_SILENT: &[u8] = include_bytes!("../fixtures/media/wide-silent.mp4");

pub(crate) const TRANSCRIPT: &str = "Do you still have places in the Saturday class?";

fn media_path(ext: &str) -> String {
    format!("/1234567/wa/2026/11/30/original_0a1b2c3d4e5f.{ext}")
}

/// The fake file host and the fake transcription server.
pub(crate) struct Fakes {
    pub files: MockServer,
    pub speech: MockServer,
}

impl Fakes {
    pub async fn start() -> Self {
        Self {
            files: MockServer::start().await,
            speech: MockServer::start().await,
        }
    }

    pub fn url(&self, ext: &str) -> String {
        format!("{}{}", self.files.uri(), media_path(ext))
    }

    pub async fn serve(&self, ext: &str, content_type: &str, bytes: &[u8]) {
        Mock::given(method("GET"))
            .and(path(media_path(ext)))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", content_type)
                    .set_body_bytes(bytes.to_vec()),
            )
            .mount(&self.files)
            .await;
    }

    pub async fn transcribe_as(&self, text: &str) {
        Mock::given(method("POST"))
            .and(path("/v1/audio/transcriptions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"text": text})))
            .mount(&self.speech)
            .await;
    }

    pub async fn file_requests(&self) -> usize {
        self.files
            .received_requests()
            .await
            .unwrap_or_default()
            .len()
    }

    pub async fn transcriptions(&self) -> Vec<Request> {
        self.speech.received_requests().await.unwrap_or_default()
    }

    /// The app with the fakes wired in; `transcription`: whether TRANSCRIPTION_MODEL is set.
    pub fn options(&self, model: Arc<ScriptedModel>, transcription: bool) -> AppOptions {
        let mut options = AppOptions::new(model).env("MANYCHAT_MEDIA_BASE", self.files.uri());
        if transcription {
            options = options
                .env("TRANSCRIPTION_MODEL", "openai:gpt-4o-mini-transcribe")
                .env("OPENAI_BASE_URL", format!("{}/v1", self.speech.uri()))
                .env("OPENAI_API_KEY", "sk-test-not-a-key");
        }
        options
    }
}

fn without_media_fallback(dir: &std::path::Path) {
    edit_rules(dir, |rules| {
        rules["messages"]
            .as_object_mut()
            .unwrap()
            .remove("mediaFallback");
    });
}

pub(crate) fn media_fallback(app: &TestApp) -> String {
    app.rules()["messages"]["mediaFallback"]
        .as_str()
        .expect("the demo tenant sets mediaFallback")
        .to_owned()
}

pub(crate) fn images(request: &ModelRequest) -> Vec<(String, Vec<u8>)> {
    let images = from_messages(request, |m| match m {
        Message::Images { images } => Some(images.to_vec()),
        _ => None,
    });
    images
        .into_iter()
        .flatten()
        .map(|image| (image.media_type.to_owned(), image.bytes.to_vec()))
        .collect()
}

/// A PNG's width and height, from its IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[1..4], b"PNG", "a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Nothing the store holds for the contact mentions the media URL or its file name.
async fn assert_no_url_stored(app: &TestApp, subscriber: &str) {
    let turns = app.turns(subscriber).await;
    for turn in &turns {
        assert!(!turn.text.contains("original_"), "turn text: {}", turn.text);
        assert!(!turn.text.contains("/wa/"), "turn text: {}", turn.text);
    }
    for row in app.outbox().await {
        assert!(!row.payload.to_string().contains("original_"));
    }
}

/// Fakes serving `bytes` as `ext` with `content_type`.
async fn serving(ext: &str, content_type: &str, bytes: &[u8]) -> Fakes {
    let fakes = Fakes::start().await;
    fakes.serve(ext, content_type, bytes).await;
    fakes
}

/// With ffmpeg on PATH: fakes serving a video with sound, transcribed as [`TRANSCRIPT`].
async fn transcribed_video_with_sound() -> Fakes {
    ffmpeg_required();
    let fakes = serving("mp4", "video/mp4", MP4_WITH_SOUND).await;
    fakes.transcribe_as(TRANSCRIPT).await;
    fakes
}

/// The app transcribing at `speech` (whose `received` counts the clips it was given), and
/// returning `subscriber`'s voice note, answered when the 8 s deadline passes while the clip
/// is with the transcriber.
async fn voice_note_at_the_deadline(
    fakes: &Fakes,
    model: &Arc<ScriptedModel>,
    speech: String,
    received: &std::sync::atomic::AtomicUsize,
    subscriber: &str,
) -> (TestApp, (u16, Value)) {
    let options = fakes
        .options(model.clone(), true)
        .env("OPENAI_BASE_URL", speech);
    let app = spawn_app_with(options).await;
    app.returning_contact(subscriber).await;
    let request = send_in_background(&app, subscriber, &fakes.url("ogg"));
    until(async || fakes.file_requests().await == 1).await;
    // Downloaded, probed, and the clip is with the transcriber before its clock starts.
    until(async || received.load(std::sync::atomic::Ordering::SeqCst) == 1).await;
    let_tasks_run().await;
    tokio::time::advance(Duration::from_secs(8)).await;
    let answered = request.await.unwrap();
    (app, answered)
}

/// A model whose one reply is never asked for.
fn unused_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies([reply_json("unused")]))
}

/// `subscriber`'s `ext` file is answered with the fallback, without the model and without
/// downloading it.
async fn assert_fallback_unfetched(
    app: &TestApp,
    fakes: &Fakes,
    model: &ScriptedModel,
    subscriber: &str,
    ext: &str,
) {
    let (_, body) = app.send(subscriber, &fakes.url(ext)).await;
    assert_eq!(block_texts(&body), vec![media_fallback(app)]);
    assert_eq!(model.calls(), 0);
    assert_eq!(fakes.file_requests().await, 0);
}

/// `subscriber`'s voice note, recorded as `text`, is answered with the escalation copy for
/// `reason` before any model call.
async fn assert_voice_note_escalated_precheck(
    app: &TestApp,
    fakes: &Fakes,
    model: &ScriptedModel,
    subscriber: &str,
    text: &str,
    reason: &str,
) {
    let (_, body) = app.send(subscriber, &fakes.url("ogg")).await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    assert_eq!(model.calls(), 0);
    let turns = app.turns(subscriber).await;
    assert_eq!(turns[0].text, text);
    assert_eq!(turns[1].outcome.as_deref(), Some("escalated_precheck"));
    assert_eq!(turns[1].escalation_reason.as_deref(), Some(reason));
}

pub(crate) fn ffmpeg_required() {
    assert!(
        manychat_agent::media::video::Ffmpeg::find().is_some(),
        "these tests need ffmpeg on PATH (`.ci/run` installs it): run with --include-ignored, \
         they fail rather than skip without it"
    );
}

// ---- 1. the adapter's mapping --------------------------------------------------------------

#[tokio::test]
async fn spec_020_verification_1_only_a_lone_media_url_on_the_file_host_is_media() {
    let logs = manychat_agent::observability::capture_global();
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    let model = Arc::new(ScriptedModel::replies([
        reply_json("Happy to help."),
        reply_json("Happy to help."),
    ]));
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    let in_sentence = format!("here is my voice note {}", fakes.url("ogg"));
    let (status, _) = app.send("3101", &in_sentence).await;
    assert_eq!(status, 200);
    let elsewhere = format!("https://files.example.test{}", media_path("ogg"));
    app.send("3101", &elsewhere).await;
    let turns = app.turns("3101").await;
    assert_eq!(
        turns[0].text, in_sentence,
        "a URL inside a sentence stays text"
    );
    assert_eq!(turns[0].media_kind, None);
    assert_eq!(turns[2].text, elsewhere, "another host stays text");
    assert_eq!(turns[2].media_kind, None);
    assert_eq!(fakes.file_requests().await, 0, "nothing was fetched");
    assert!(fakes.transcriptions().await.is_empty());
    // The lone URL on another host is a near miss: logged by name, never with the URL.
    let text = logs.text();
    assert!(text.contains("media_url_unmatched"));
    assert!(!text.contains("files.example.test"));
}

// ---- 2. a voice note, end to end -----------------------------------------------------------

#[tokio::test]
async fn spec_020_verification_2_a_voice_note_is_transcribed_answered_and_no_url_is_kept() {
    let logs = manychat_agent::observability::capture_global();
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    fakes.transcribe_as(TRANSCRIPT).await;
    let model = Arc::new(ScriptedModel::replies([reply_json(
        "Yes, the Saturday class has places.",
    )]));
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;

    let (status, body) = app.send("3201", &fakes.url("ogg")).await;
    assert_eq!(status, 200);
    assert_eq!(
        block_texts(&body),
        vec!["Yes, the Saturday class has places."]
    );

    // The transcription server got the clip as multipart, with the model's name.
    let requests = fakes.transcriptions().await;
    assert_eq!(requests.len(), 1);
    let upload = &requests[0];
    let content_type = upload
        .headers
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(content_type.starts_with("multipart/form-data; boundary="));
    let body = &upload.body;
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"name=\"model\"\r\n\r\ngpt-4o-mini-transcribe"));
    assert!(has(b"name=\"file\"; filename=\"voice-note.ogg\""));
    assert!(has(OGG), "the voice note's bytes, whole");
    assert_eq!(
        upload.headers.get("authorization").unwrap(),
        "Bearer sk-test-not-a-key"
    );

    // The model read the transcript as the contact's message, and was told it is one.
    let prompt = user_text(&model.requests()[0]);
    assert!(prompt.contains(TRANSCRIPT));
    assert!(prompt.contains("transcript of a voice note"));
    assert!(!prompt.contains("original_"));

    let turns = app.turns("3201").await;
    assert_eq!(
        turns[0].text, TRANSCRIPT,
        "the transcript replaces the marker"
    );
    assert_eq!(turns[0].media_kind.as_deref(), Some("audio"));
    assert!(turns[0].cost_usd > 0.0, "the transcription is priced");
    let day = turns[0].created_at.date_naive();
    let spent = app.store.budget(day).await.unwrap();
    assert!(
        spent.cost_usd >= turns[0].cost_usd + turns[1].cost_usd - 1e-12,
        "the transcription counts against the day's budget: {spent:?}"
    );
    assert_eq!(turns[1].outcome.as_deref(), Some("answered_inline"));
    assert_no_url_stored(&app, "3201").await;

    let conversation = app.conversation("3201").await;
    let text = logs.text();
    assert!(text.contains(&conversation.id.to_string()));
    assert!(
        !text.contains("original_0a1b2c3d4e5f"),
        "no media URL in any log line"
    );
    assert!(!text.contains("1234567/wa"), "no media URL in any log line");
}

// ---- 3. keywords on the transcript ----------------------------------------------------------

#[tokio::test]
async fn spec_020_verification_3_an_escalation_keyword_in_the_transcript_escalates_without_the_model()
 {
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    fakes
        .transcribe_as("I want a refund for last week, please")
        .await;
    let model = unused_model();
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    assert_voice_note_escalated_precheck(
        &app,
        &fakes,
        &model,
        "3301",
        "I want a refund for last week, please",
        "escalation_keyword",
    )
    .await;
}

// ---- 4. images ------------------------------------------------------------------------------

#[tokio::test]
async fn spec_020_verification_4_an_image_reaches_a_vision_model_once_as_bytes_and_history_keeps_the_marker()
 {
    let fakes = serving("png", "image/png", PNG).await;
    let model = Arc::new(
        ScriptedModel::replies([
            reply_json("That is our colour chart."),
            reply_json("Anything else?"),
        ])
        .with_vision(),
    );
    let app = spawn_app_with(fakes.options(model.clone(), false)).await;
    let (_, body) = app.send("3401", &fakes.url("png")).await;
    assert_eq!(block_texts(&body), vec!["That is our colour chart."]);
    let first = &model.requests()[0];
    assert_eq!(images(first), vec![("image/png".to_owned(), PNG.to_vec())]);
    assert!(
        user_text(first).contains("never evidence of a catalog fact"),
        "the model is told an image proves nothing"
    );
    let turns = app.turns("3401").await;
    assert_eq!(turns[0].text, "[image]");
    assert_eq!(turns[0].media_kind.as_deref(), Some("image"));

    // The next turn reads the marker in history, and no image again.
    app.send("3401", "thanks").await;
    let second = &model.requests()[1];
    assert!(
        images(second).is_empty(),
        "the image went to the model once"
    );
    assert!(user_text(second).contains("[image]"));
    assert_no_url_stored(&app, "3401").await;
}

#[tokio::test]
async fn spec_020_verification_4_an_image_for_a_model_without_vision_takes_the_fallback_unfetched()
{
    let fakes = serving("png", "image/png", PNG).await;
    let model = unused_model();
    let app = spawn_app_with(fakes.options(model.clone(), false)).await;
    assert_fallback_unfetched(&app, &fakes, &model, "3402", "png").await;
}

// ---- 5. video, one test per row of the degradation table ------------------------------------

#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn spec_020_verification_5_video_with_vision_and_transcription_gives_frames_and_transcript() {
    let fakes = transcribed_video_with_sound().await;
    let model = Arc::new(ScriptedModel::replies([reply_json("Nice studio!")]).with_vision());
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    let (_, body) = app.send("3501", &fakes.url("mp4")).await;
    assert_eq!(block_texts(&body), vec!["Nice studio!"]);
    let request = &model.requests()[0];
    let frames = images(request);
    assert!(
        (1..=4).contains(&frames.len()),
        "{} frames, at most 4",
        frames.len()
    );
    assert_eq!(
        frames.len(),
        4,
        "a 2-second clip has a frame in each quarter"
    );
    for (media_type, bytes) in &frames {
        assert_eq!(media_type, "image/png");
        assert_eq!(
            png_size(bytes),
            (160, 120),
            "a small frame is never enlarged"
        );
    }
    assert!(user_text(request).contains(TRANSCRIPT));
    let sound = &fakes.transcriptions().await[0];
    assert!(
        sound
            .body
            .windows(b"audio.ogg".len())
            .any(|w| w == b"audio.ogg")
    );
    let turns = app.turns("3501").await;
    assert_eq!(turns[0].text, TRANSCRIPT);
    assert_eq!(turns[0].media_kind.as_deref(), Some("video"));
}

#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn spec_020_verification_5_video_with_vision_only_gives_frames_no_larger_than_768_px() {
    ffmpeg_required();
    let fakes = serving("mp4", "video/mp4", MP4_WIDE_SILENT).await;
    let model = Arc::new(ScriptedModel::replies([reply_json("Lovely colour.")]).with_vision());
    let app = spawn_app_with(fakes.options(model.clone(), false)).await;
    let (_, body) = app.send("3502", &fakes.url("mp4")).await;
    assert_eq!(block_texts(&body), vec!["Lovely colour."]);
    let frames = images(&model.requests()[0]);
    assert!((1..=4).contains(&frames.len()), "{} frames", frames.len());
    for (_, bytes) in &frames {
        assert_eq!(
            png_size(bytes),
            (768, 432),
            "1280×720 scaled to 768 on its longest side"
        );
    }
    let turns = app.turns("3502").await;
    assert_eq!(turns[0].text, "[video]");
    assert_eq!(turns[0].media_kind.as_deref(), Some("video"));
}

#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn spec_020_verification_5_video_with_transcription_only_gives_the_transcript() {
    let fakes = transcribed_video_with_sound().await;
    let model = Arc::new(ScriptedModel::replies([reply_json("It does.")]));
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    let (_, body) = app.send("3503", &fakes.url("mp4")).await;
    assert_eq!(block_texts(&body), vec!["It does."]);
    let request = &model.requests()[0];
    assert!(
        images(request).is_empty(),
        "a model without vision gets no frames"
    );
    assert!(user_text(request).contains(TRANSCRIPT));
    assert_eq!(app.turns("3503").await[0].text, TRANSCRIPT);
}

#[tokio::test]
async fn spec_020_verification_5_video_with_neither_half_takes_the_fallback_unfetched() {
    let fakes = serving("mp4", "video/mp4", MP4_WITH_SOUND).await;
    let model = unused_model();
    let app = spawn_app_with(fakes.options(model.clone(), false)).await;
    assert_fallback_unfetched(&app, &fakes, &model, "3504", "mp4").await;
    let turns = app.turns("3504").await;
    assert_eq!(turns[0].text, "[video]");
    assert_eq!(turns[1].outcome.as_deref(), Some("media_fallback"));
}

// ---- 6. the fallback ------------------------------------------------------------------------

#[tokio::test]
async fn spec_020_verification_6_an_unsupported_file_gets_media_fallback_without_the_model_or_a_download()
 {
    let fakes = Fakes::start().await;
    let model = unused_model();
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    let (_, body) = app.send("3601", &fakes.url("pdf")).await;
    assert_eq!(block_texts(&body), vec![media_fallback(&app)]);
    assert_eq!(model.calls(), 0);
    assert_eq!(fakes.file_requests().await, 0, "never downloaded");
    let turns = app.turns("3601").await;
    assert_eq!(turns[0].text, "[media]");
    assert_eq!(turns[0].media_kind.as_deref(), Some("unsupported"));
    assert_eq!(turns[1].outcome.as_deref(), Some("media_fallback"));
    assert_eq!(turns[1].text, media_fallback(&app));
}

#[tokio::test]
async fn spec_020_verification_6_a_voice_note_without_transcription_or_fallback_escalates_precheck()
{
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    let model = unused_model();
    let app = spawn_app_with(
        fakes
            .options(model.clone(), false)
            .edit(without_media_fallback),
    )
    .await;
    assert_voice_note_escalated_precheck(
        &app,
        &fakes,
        &model,
        "3602",
        "[voice note]",
        "media_unanswerable",
    )
    .await;
    assert!(app.conversation("3602").await.escalated_at.is_some());
}

#[tokio::test]
async fn spec_020_verification_6_an_empty_transcript_takes_the_fallback() {
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    fakes.transcribe_as("   ").await;
    let model = unused_model();
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    let (_, body) = app.send("3603", &fakes.url("ogg")).await;
    assert_eq!(block_texts(&body), vec![media_fallback(&app)]);
    assert_eq!(model.calls(), 0);
    let turns = app.turns("3603").await;
    assert_eq!(turns[0].text, "[voice note]");
    assert_eq!(turns[1].outcome.as_deref(), Some("media_fallback"));
}

// ---- 7. failures escalate with outcome `error` ----------------------------------------------

async fn assert_media_error(app: &TestApp, subscriber: &str, body: &Value, model_calls: usize) {
    assert_eq!(block_texts(body), vec![app.escalation_copy()]);
    assert_eq!(model_calls, 0, "the model does not run");
    let turns = app.turns(subscriber).await;
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].outcome.as_deref(), Some("error"), "{subscriber}");
    assert_eq!(turns[1].escalation_reason.as_deref(), Some("media_failed"));
    assert_no_url_stored(app, subscriber).await;
}

#[tokio::test]
async fn spec_020_verification_7_download_content_type_redirect_and_size_failures_give_error() {
    let fakes = Fakes::start().await;
    // A 404, a wrong Content-Type, a redirect (never followed), an image over 5 MB.
    let missing = "/1/wa/2026/01/01/original_aa.ogg".to_owned();
    let mislabelled = "/2/wa/2026/01/01/original_bb.ogg".to_owned();
    let redirected = "/3/wa/2026/01/01/original_cc.ogg".to_owned();
    let oversized = "/4/wa/2026/01/01/original_dd.png".to_owned();
    for (path, response) in [
        (&missing, ResponseTemplate::new(404)),
        (
            &mislabelled,
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/html")
                .set_body_bytes(OGG.to_vec()),
        ),
        (
            &redirected,
            ResponseTemplate::new(302)
                .insert_header("location", format!("{}{missing}", fakes.files.uri())),
        ),
        (
            &oversized,
            ResponseTemplate::new(200)
                .insert_header("content-type", "image/png")
                .set_body_bytes(vec![0u8; 5 * 1024 * 1024 + 1]),
        ),
    ] {
        Mock::given(method("GET"))
            .and(wiremock::matchers::path(path.as_str()))
            .respond_with(response)
            .mount(&fakes.files)
            .await;
    }
    fakes.transcribe_as(TRANSCRIPT).await;
    let model = Arc::new(ScriptedModel::replies([reply_json("unused")]).with_vision());
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    for (subscriber, file) in [
        ("3701", &missing),
        ("3702", &mislabelled),
        ("3703", &redirected),
        ("3704", &oversized),
    ] {
        let (status, body) = app
            .send(subscriber, &format!("{}{file}", fakes.files.uri()))
            .await;
        assert_eq!(status, 200);
        assert_media_error(&app, subscriber, &body, model.calls()).await;
    }
    let fetched = fakes.files.received_requests().await.unwrap();
    assert_eq!(fetched.len(), 4, "the redirect was not followed");
    assert!(fakes.transcriptions().await.is_empty());
}

#[tokio::test]
#[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
async fn spec_020_verification_7_transcription_and_ffmpeg_failures_give_error() {
    ffmpeg_required();
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    // Not a video at all, though labelled one.
    fakes
        .serve("mp4", "video/mp4", b"not a video, just bytes")
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/audio/transcriptions"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&fakes.speech)
        .await;
    let model = Arc::new(ScriptedModel::replies([reply_json("unused")]).with_vision());
    let app = spawn_app_with(fakes.options(model.clone(), true)).await;
    let (_, body) = app.send("3705", &fakes.url("ogg")).await;
    assert_media_error(&app, "3705", &body, model.calls()).await;
    let (_, body) = app.send("3706", &fakes.url("mp4")).await;
    assert_media_error(&app, "3706", &body, model.calls()).await;
}

// ---- 8. the race ----------------------------------------------------------------------------

/// A transcription server on the test's own runtime, answering after `delay` of tokio time (the
/// frozen clock decides when it answers); its base URL, and how many clips it has received.
async fn slow_transcriber(
    delay: Duration,
    text: &'static str,
) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::routing::post;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let received = Arc::new(AtomicUsize::new(0));
    let counter = received.clone();
    let app = axum::Router::new().route(
        "/v1/audio/transcriptions",
        post(move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            axum::Json(json!({"text": text}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/v1"), received)
}

#[tokio::test(start_paused = true)]
async fn spec_020_verification_8_a_slow_transcription_loses_the_race_and_the_reply_comes_through_the_outbox()
 {
    let _frozen = FrozenClock::freeze();
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    let (speech, received) = slow_transcriber(Duration::from_secs(9), TRANSCRIPT).await;
    let model = Arc::new(ScriptedModel::from_steps([ScriptStep::ok(reply(
        reply_json("Yes, there are places on Saturday."),
    ))]));
    let (app, (status, body)) =
        voice_note_at_the_deadline(&fakes, &model, speech, &received, "3801").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.acknowledgement()]);
    assert_eq!(
        model.calls(),
        0,
        "the model had not started: the transcription was slow"
    );
    let promised = app.turns("3801").await;
    assert_eq!(
        promised.last().unwrap().text,
        "[voice note]",
        "the marker first"
    );

    // The transcription finishes, the model answers, the reply goes through the outbox.
    tokio::time::advance(Duration::from_secs(2)).await;
    until(async || model.calls() == 1).await;
    app.settle_advancing().await;
    let turns = app.turns("3801").await;
    let message = turns.iter().find(|t| t.media_kind.is_some()).unwrap();
    assert_eq!(message.text, TRANSCRIPT, "then the transcript");
    assert_eq!(turns.last().unwrap().outcome.as_deref(), Some("deferred"));
    let replies: Vec<_> = app
        .outbox()
        .await
        .into_iter()
        .filter(|row| row.payload["messages"][0] == "Yes, there are places on Saturday.")
        .collect();
    assert_eq!(replies.len(), 1, "the reply is queued for the outbox");
    assert_no_url_stored(&app, "3801").await;
}

#[tokio::test(start_paused = true)]
async fn spec_020_verification_8_a_fallback_decided_after_the_deadline_keeps_its_outcome() {
    let _frozen = FrozenClock::freeze();
    let fakes = serving("ogg", "audio/ogg", OGG).await;
    let (speech, received) = slow_transcriber(Duration::from_secs(9), "").await;
    let model = unused_model();
    let (app, (_, body)) =
        voice_note_at_the_deadline(&fakes, &model, speech, &received, "3802").await;
    assert_eq!(block_texts(&body), vec![app.acknowledgement()]);

    // The empty transcript arrives after the deadline: the fallback goes through the outbox,
    // recorded `media_fallback`, never `deferred`.
    tokio::time::advance(Duration::from_secs(2)).await;
    let fallback = media_fallback(&app);
    until(async || {
        app.outbox()
            .await
            .iter()
            .any(|row| row.payload["messages"][0] == fallback.as_str())
    })
    .await;
    app.settle_advancing().await;
    assert_eq!(model.calls(), 0);
    let turns = app.turns("3802").await;
    assert_eq!(
        turns.last().unwrap().outcome.as_deref(),
        Some("media_fallback")
    );
    assert_eq!(turns[turns.len() - 2].text, "[voice note]");
}

// ---- 10. the transcription provider lives in the model registry only ------------------------

#[test]
fn spec_020_verification_10_the_transcription_wire_format_lives_only_in_the_model_registry() {
    fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains("audio/transcriptions") || text.contains("OpenAiTranscriber") {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    let mut found = Vec::new();
    visit(&repo_path("src"), &mut found);
    assert!(!found.is_empty(), "the scan sees the provider");
    for file in &found {
        assert!(
            file.contains("/src/model/"),
            "{file} knows a transcription provider's wire format"
        );
    }
}

// ---- the demo: a voice note works offline ---------------------------------------------------

#[tokio::test]
async fn the_sandbox_and_mock_demo_answer_a_voice_note_offline() {
    use manychat_agent::manychat::sandbox;
    use manychat_agent::model::transcription::DEMO_TRANSCRIPT;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sandbox = sandbox::spawn(listener, shutdown.clone()).await.unwrap();
    let model = Arc::new(manychat_agent::model::demo::DemoModel::new());
    let options = AppOptions::new(model)
        .env("MANYCHAT_MEDIA_BASE", sandbox.base_url.clone())
        .env("TRANSCRIPTION_MODEL", "mock:demo");
    let app = spawn_app_with(options).await;
    let url = format!("{}{}", sandbox.base_url, sandbox::DEMO_VOICE_NOTE_PATH);
    let (status, body) = app.send("3901", &url).await;
    assert_eq!(status, 200);
    let texts = block_texts(&body);
    assert!(
        !texts.is_empty() && texts[0] != app.escalation_copy(),
        "{texts:?}"
    );
    let turns = app.turns("3901").await;
    assert_eq!(turns[0].text, DEMO_TRANSCRIPT);
    assert_eq!(turns[0].media_kind.as_deref(), Some("audio"));
    assert_eq!(turns[1].outcome.as_deref(), Some("answered_inline"));
    shutdown.cancel();
}
