//! How much a contact's media may cost the service: what a file may declare before anything
//! decodes it, what is extracted from it, what each ffmpeg or ffprobe process may use, and how
//! many media jobs run at once. Set by the `MEDIA_*` variables (`settings`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

/// The limits, with the defaults a deployment gets when the variables are unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaLimits {
    /// `MEDIA_MAX_DURATION_SECONDS`: a voice note or video that declares a longer duration (in
    /// its container or any stream) is refused before it is decoded.
    pub max_duration: Duration,
    /// `MEDIA_MAX_AUDIO_SECONDS`: the most audio ever transcribed; a longer voice note or
    /// soundtrack is cut to it (so a header that understates its length yields no more).
    pub max_audio: Duration,
    /// `MEDIA_MAX_DIMENSION`: a video stream wider or taller than this many pixels is refused,
    /// and no decoder is allowed a picture of more than its square.
    pub max_dimension: u32,
    /// `MEDIA_PROCESS_MEMORY_MB`, in bytes: each ffmpeg/ffprobe process's address space.
    pub process_memory: u64,
    /// `MEDIA_PROCESS_TIMEOUT_MS`: each process's wall-clock time (it is killed at it), and,
    /// rounded up to whole seconds, its CPU time.
    pub process_time: Duration,
    /// `MEDIA_MAX_JOBS`: media messages read at once; the others wait for a slot.
    pub max_jobs: usize,
}

pub const DEFAULT_MAX_DURATION_SECONDS: u64 = 300;
pub const DEFAULT_MAX_AUDIO_SECONDS: u64 = 300;
pub const DEFAULT_MAX_DIMENSION: u32 = 4096;
/// Each process's address space; with [`DEFAULT_MAX_JOBS`] the media processes together stay
/// within 512 MB (a job runs one process at a time). Measured: a 4096×4096 frame decodes in
/// about 130 MB, and ffprobe and ffmpeg need about 260 MB of address space just to load.
pub const DEFAULT_PROCESS_MEMORY_MB: u64 = 512;
pub const DEFAULT_PROCESS_TIMEOUT_MS: u64 = 20_000;
pub const DEFAULT_MAX_JOBS: usize = 1;
/// The ranges the variables are checked against.
pub const MAX_MEDIA_SECONDS: u64 = 3_600;
pub const MAX_DIMENSION: u32 = 16_384;
pub const MIN_PROCESS_MEMORY_MB: u64 = 128;
pub const MAX_PROCESS_MEMORY_MB: u64 = 65_536;
pub const MAX_JOBS: u64 = 64;

impl Default for MediaLimits {
    fn default() -> Self {
        Self {
            max_duration: Duration::from_secs(DEFAULT_MAX_DURATION_SECONDS),
            max_audio: Duration::from_secs(DEFAULT_MAX_AUDIO_SECONDS),
            max_dimension: DEFAULT_MAX_DIMENSION,
            process_memory: DEFAULT_PROCESS_MEMORY_MB * 1024 * 1024,
            process_time: Duration::from_millis(DEFAULT_PROCESS_TIMEOUT_MS),
            max_jobs: DEFAULT_MAX_JOBS,
        }
    }
}

impl MediaLimits {
    /// The largest picture a decoder may allocate (ffmpeg's `max_pixels`).
    pub fn max_pixels(&self) -> u64 {
        u64::from(self.max_dimension) * u64::from(self.max_dimension)
    }
}

/// At most `MEDIA_MAX_JOBS` media messages are downloaded, decoded and transcribed at once;
/// a message beyond it waits (within its turn's deadline and abort) for a slot.
#[derive(Debug, Clone)]
pub struct JobSlots(Arc<Semaphore>);

impl JobSlots {
    pub fn new(jobs: usize) -> Self {
        Self(Arc::new(Semaphore::new(jobs.max(1))))
    }

    /// A slot, held until the permit is dropped.
    pub async fn acquire(&self) -> SemaphorePermit<'_> {
        self.0
            .acquire()
            .await
            .expect("the media semaphore is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::probe::Probe;
    use crate::media::process::tests::{pause, stand_in};
    use crate::media::video::Ffmpeg;
    use crate::media::{FallbackCause, MediaKind, MediaRef, MediaService, MediaSettings, Prepared};
    use crate::model::ModelError;
    use crate::model::transcription::{AudioClip, Transcriber, Transcript};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    const OGG: &[u8] = include_bytes!("../../tests/fixtures/media/tone.ogg");
    /// 1280×720, two seconds, no soundtrack.
    const MP4_WIDE: &[u8] = include_bytes!("../../tests/fixtures/media/wide-silent.mp4");

    /// A file host serving `bytes` as `content_type` at every path.
    async fn file_host(content_type: &str, bytes: &[u8]) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", content_type)
                    .set_body_bytes(bytes.to_vec()),
            )
            .mount(&server)
            .await;
        server
    }

    fn media_on(server: &MockServer, kind: MediaKind, ext: &str) -> MediaRef {
        let url = format!("{}/1/wa/2026/01/01/original_ab.{ext}", server.uri());
        MediaRef {
            kind,
            url: url.parse().unwrap(),
        }
    }

    /// A transcriber that counts the clips it holds at once and answers each only when the
    /// test opens its gate.
    struct Gate {
        inside: AtomicUsize,
        most: AtomicUsize,
        open: Semaphore,
    }

    #[async_trait::async_trait]
    impl Transcriber for Gate {
        fn id(&self) -> &str {
            "test:gate"
        }

        async fn transcribe(&self, _clip: AudioClip) -> Result<Transcript, ModelError> {
            let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.open.acquire().await.unwrap().forget();
            self.inside.fetch_sub(1, Ordering::SeqCst);
            Ok(Transcript {
                text: "hello".into(),
                cost_usd: 0.0,
            })
        }
    }

    #[tokio::test]
    async fn hostile_media_the_job_limit_admits_at_most_n_media_messages_at_once() {
        let files = file_host("audio/ogg", OGG).await;
        let gate = Arc::new(Gate {
            inside: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            open: Semaphore::new(0),
        });
        let service = MediaService::new(MediaSettings {
            transcriber: Some(gate.clone()),
            limits: MediaLimits {
                max_jobs: 2,
                ..MediaLimits::default()
            },
            ..MediaSettings::default()
        });
        let media = media_on(&files, MediaKind::Audio, "ogg");
        let jobs: Vec<_> = (0..5)
            .map(|_| {
                let (service, media) = (service.clone(), media.clone());
                tokio::spawn(async move { service.prepare(&media, false).await })
            })
            .collect();
        for _ in 0..400 {
            if gate.inside.load(Ordering::SeqCst) == 2 {
                break;
            }
            pause().await;
        }
        // Time for the other three to get in, were they let.
        for _ in 0..20 {
            pause().await;
        }
        assert_eq!(gate.inside.load(Ordering::SeqCst), 2, "two jobs at once");
        let fetched = files.received_requests().await.unwrap().len();
        assert_eq!(fetched, 2, "a waiting job has not downloaded yet");
        gate.open.add_permits(5);
        for job in jobs {
            assert!(matches!(job.await.unwrap(), Prepared::Ready(_)));
        }
        assert_eq!(gate.most.load(Ordering::SeqCst), 2);
        assert_eq!(files.received_requests().await.unwrap().len(), 5);
    }

    #[tokio::test]
    #[ignore = "needs ffmpeg on PATH (`.ci/run` installs it)"]
    async fn hostile_media_an_oversized_frame_is_refused_by_the_probe_before_ffmpeg_decodes_it() {
        let real = Ffmpeg::find().expect("these tests need ffmpeg and ffprobe on PATH");
        // ffmpeg is a stand-in that leaves a mark when it runs; ffprobe is the real one.
        let (_dir, ffmpeg, ran) = stand_in("ffmpeg", "ffmpeg-ran", "touch '{note}'");
        let files = file_host("video/mp4", MP4_WIDE).await;
        let service = MediaService::new(MediaSettings {
            ffmpeg: Some(Ffmpeg::at(&ffmpeg, real.ffprobe_path())),
            limits: MediaLimits {
                max_dimension: 640,
                ..MediaLimits::default()
            },
            ..MediaSettings::default()
        });
        let prepared = service
            .prepare(&media_on(&files, MediaKind::Video, "mp4"), true)
            .await;
        assert!(
            matches!(prepared, Prepared::Fallback(FallbackCause::FrameTooLarge)),
            "{prepared:?}"
        );
        assert!(!ran.exists(), "ffmpeg never ran on the refused file");
        // Within the limit, the same file does reach ffmpeg (the stand-in proves it ran).
        let service = MediaService::new(MediaSettings {
            ffmpeg: Some(Ffmpeg::at(&ffmpeg, real.ffprobe_path())),
            ..MediaSettings::default()
        });
        service
            .prepare(&media_on(&files, MediaKind::Video, "mp4"), true)
            .await;
        assert!(ran.exists(), "the stand-in marks a run");
    }

    fn probe(seconds: Option<u64>, frames: Vec<Option<(u32, u32)>>) -> Probe {
        Probe {
            duration: seconds.map(Duration::from_secs),
            has_audio: true,
            frames,
        }
    }

    #[test]
    fn hostile_media_over_a_limit_or_unmeasured_is_refused_with_the_fallback() {
        let limits = MediaLimits {
            max_duration: Duration::from_secs(60),
            max_dimension: 1000,
            ..MediaLimits::default()
        };
        assert_eq!(
            limits.admit(&probe(Some(60), vec![Some((1000, 10))])),
            Ok(())
        );
        assert_eq!(
            limits.admit(&probe(Some(61), vec![])),
            Err(FallbackCause::TooLong)
        );
        assert_eq!(
            limits.admit(&probe(None, vec![])),
            Err(FallbackCause::Unmeasured)
        );
        assert_eq!(
            limits.admit(&probe(Some(1), vec![Some((10, 10)), Some((16000, 16000))])),
            Err(FallbackCause::FrameTooLarge)
        );
        assert_eq!(
            limits.admit(&probe(Some(1), vec![None])),
            Err(FallbackCause::FrameTooLarge),
            "an unknown frame size counts as over the limit"
        );
        assert_eq!(limits.max_pixels(), 1_000_000);
    }
}
