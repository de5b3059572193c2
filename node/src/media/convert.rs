//! Server-side media conversion with the system `ffmpeg`: a voice note (OGG/Opus, mono 48 kHz, what phones
//! play as a voice message) or a phone-playable video (MP4, H.264 baseline + AAC, `faststart`, fitted inside 720p). Conversions
//! run at most `MEDIA_CONVERSION_CONCURRENCY` at a time with at most `MEDIA_CONVERSION_QUEUE` more waiting
//! (beyond that: refused, 503); each child gets `MEDIA_CONVERSION_TIMEOUT_MS` and is killed after it (and
//! whenever its request goes away: `kill_on_drop`). ffmpeg itself stops writing one byte past
//! `MEDIA_CONVERSION_MAX_OUTPUT_BYTES` (`-fs`), and such an output is refused.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::{Mutex, Semaphore};

/// How long a successful `ffmpeg -version` vouches for the binary. Without it every conversion request
/// spawned a probe of its own: a burst spawned as many as it had requests, and on a loaded machine one of
/// them missing the probe's timeout refused a conversion that would have run.
const PROBE_VALID_FOR: Duration = Duration::from_secs(60);

/// How long a failed probe stands, so that requests queued behind a probe that hung are refused at once
/// instead of each waiting out a probe of its own.
const FAILED_PROBE_STANDS_FOR: Duration = Duration::from_secs(5);

/// How long the probe may take before the binary counts as not runnable: the spec's request budget.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The last probe: when it ran and, if it failed, why.
type Probed = Option<(Instant, Result<(), String>)>;

/// The video filter: fit inside 1280x720 (720x1280 when portrait, a square as landscape), keeping the
/// aspect ratio, never upscaling, with even dimensions (yuv420p needs them). Level 3.1 tops out at 720p:
/// a larger frame is flagged 3.1 yet fails to play on the phones that honour the flag.
const VIDEO_FIT: &str = "scale=w='if(gte(iw,ih),min(1280,iw),min(720,iw))'\
:h='if(gte(iw,ih),min(720,ih),min(1280,ih))'\
:force_original_aspect_ratio=decrease:force_divisible_by=2";

/// What to convert into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Voice,
    Video,
}

impl Target {
    pub(crate) fn mimetype(self) -> &'static str {
        match self {
            Target::Voice => "audio/ogg; codecs=opus",
            Target::Video => "video/mp4",
        }
    }

    fn args(self) -> &'static [&'static str] {
        match self {
            Target::Voice => &[
                "-vn",
                "-map_metadata",
                "-1",
                "-ac",
                "1",
                "-ar",
                "48000",
                "-c:a",
                "libopus",
                "-b:a",
                "32k",
                "-application",
                "voip",
                "-f",
                "ogg",
            ],
            Target::Video => &[
                "-map",
                "0:v:0",
                "-map",
                "0:a:0?",
                "-c:v",
                "libx264",
                "-profile:v",
                "baseline",
                "-level",
                "3.1",
                "-pix_fmt",
                "yuv420p",
                "-vf",
                VIDEO_FIT,
                "-preset",
                "veryfast",
                "-crf",
                "28",
                "-c:a",
                "aac",
                "-b:a",
                "128k",
                "-movflags",
                "+faststart",
                "-f",
                "mp4",
            ],
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConvertError {
    #[error("Media conversion is disabled (MEDIA_CONVERSION_ENABLED=false)")]
    Disabled,
    #[error("Media conversion is unavailable: {0}")]
    NotRunnable(String),
    #[error("Media conversion queue is full; retry later")]
    QueueFull,
    #[error("Media conversion timed out after {0} ms")]
    TimedOut(u64),
    #[error("Converted media exceeds MEDIA_CONVERSION_MAX_OUTPUT_BYTES ({0} bytes)")]
    OutputTooLarge(u64),
    /// ffmpeg refused the input (not media, or no stream to convert).
    #[error("Media could not be converted: {0}")]
    BadInput(String),
    /// The media store failed reading the input or writing the output.
    #[error(transparent)]
    Media(#[from] super::MediaError),
    #[error("media conversion failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The knobs of conversion, from the config.
#[derive(Debug, Clone)]
pub(crate) struct ConvertLimits {
    pub enabled: bool,
    pub ffmpeg: PathBuf,
    pub concurrency: usize,
    pub queue: usize,
    pub timeout_ms: u64,
    pub max_output_bytes: u64,
    /// Where scratch output files go (inside `DATA_DIR`).
    pub scratch_dir: PathBuf,
}

/// A conversion stored back into the media store.
pub(crate) struct ConvertedObject {
    pub stored: super::StoredMedia,
    pub mimetype: &'static str,
}

/// The converter; cheap to clone.
#[derive(Clone)]
pub(crate) struct Converter {
    limits: Arc<ConvertLimits>,
    running: Arc<Semaphore>,
    /// Conversions admitted (running or waiting for a slot).
    admitted: Arc<AtomicUsize>,
    /// The last probe. Held across a probe, so concurrent checks wait for one probe.
    probed: Arc<Mutex<Probed>>,
}

/// A finished conversion's output file (deleted when dropped).
struct Converted {
    file: tempfile::TempPath,
    mimetype: &'static str,
}

/// Gives the admission back when the conversion ends, however it ends.
struct Admission(Arc<AtomicUsize>);

impl Drop for Admission {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Converter {
    pub(crate) fn new(limits: ConvertLimits) -> Converter {
        Converter {
            running: Arc::new(Semaphore::new(limits.concurrency.max(1))),
            admitted: Arc::new(AtomicUsize::new(0)),
            probed: Arc::new(Mutex::new(None)),
            limits: Arc::new(limits),
        }
    }

    /// Whether conversion is enabled and the binary runs: `ffmpeg -version` exited 0 within the last
    /// [`PROBE_VALID_FOR`] (and did not fail within the last [`FAILED_PROBE_STANDS_FOR`]), or does so now.
    pub(crate) async fn check(&self) -> Result<(), ConvertError> {
        if !self.limits.enabled {
            return Err(ConvertError::Disabled);
        }
        let mut probed = self.probed.lock().await;
        if let Some((at, outcome)) = probed.as_ref() {
            let stands_for = match outcome {
                Ok(()) => PROBE_VALID_FOR,
                Err(_) => FAILED_PROBE_STANDS_FOR,
            };
            if at.elapsed() < stands_for {
                return outcome.clone().map_err(ConvertError::NotRunnable);
            }
        }
        let outcome = self.probe().await;
        *probed = Some((Instant::now(), outcome.clone()));
        outcome.map_err(ConvertError::NotRunnable)
    }

    /// Runs `ffmpeg -version` once; the error says why the binary is not runnable.
    async fn probe(&self) -> Result<(), String> {
        let probe = Command::new(&self.limits.ffmpeg)
            .arg("-version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .status();
        match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!(
                "{} -version exited with {status}",
                self.limits.ffmpeg.display()
            )),
            Ok(Err(err)) => Err(format!(
                "{} cannot be run: {err}",
                self.limits.ffmpeg.display()
            )),
            Err(_) => Err(format!(
                "{} -version did not answer within {} s",
                self.limits.ffmpeg.display(),
                PROBE_TIMEOUT.as_secs()
            )),
        }
    }

    /// Forgets the last probe: the binary could not be started after all (removed, replaced).
    async fn forget_probe(&self) {
        *self.probed.lock().await = None;
    }

    /// Converts the stored object `key` into a new object of `session_id` (a send's media). The input is
    /// streamed from the store into a scratch file (ffmpeg needs a seekable file), the output streamed back.
    pub(crate) async fn convert_object(
        &self,
        store: &super::MediaStore,
        session_id: &str,
        key: &str,
        target: Target,
    ) -> Result<ConvertedObject, ConvertError> {
        let converted = self.convert_stored(store, key, target).await?;
        let file = tokio::fs::File::open(&converted.file).await?;
        let stored = store.put_reader(session_id, file, u64::MAX).await?;
        Ok(ConvertedObject {
            stored,
            mimetype: converted.mimetype,
        })
    }

    /// Converts the stored object `key` and answers the output's bytes (at most
    /// `MEDIA_CONVERSION_MAX_OUTPUT_BYTES`) and mimetype: the conversion route answers them inline.
    pub(crate) async fn convert_to_bytes(
        &self,
        store: &super::MediaStore,
        key: &str,
        target: Target,
    ) -> Result<(Vec<u8>, &'static str), ConvertError> {
        let converted = self.convert_stored(store, key, target).await?;
        let bytes = tokio::fs::read(&converted.file).await?;
        Ok((bytes, converted.mimetype))
    }

    async fn convert_stored(
        &self,
        store: &super::MediaStore,
        key: &str,
        target: Target,
    ) -> Result<Converted, ConvertError> {
        // Not the full check (`convert` runs it): only spare the copy when conversion is off.
        if !self.limits.enabled {
            return Err(ConvertError::Disabled);
        }
        let input = store
            .scratch_copy(key, &self.limits.scratch_dir)
            .await?
            .ok_or_else(|| ConvertError::BadInput(format!("media object {key} is not stored")))?;
        self.convert(&input, target).await
    }

    /// Converts the file at `input`; waits for a slot in the bounded queue (refused when it is full).
    async fn convert(&self, input: &Path, target: Target) -> Result<Converted, ConvertError> {
        self.check().await?;
        let limit = self.limits.concurrency.max(1) + self.limits.queue;
        let admitted = self.admitted.fetch_add(1, Ordering::AcqRel);
        let admission = Admission(self.admitted.clone());
        if admitted >= limit {
            return Err(ConvertError::QueueFull);
        }
        let _slot = self
            .running
            .acquire()
            .await
            .map_err(|_| ConvertError::QueueFull)?;
        let result = self.run(input, target).await;
        drop(admission);
        result
    }

    async fn run(&self, input: &Path, target: Target) -> Result<Converted, ConvertError> {
        tokio::fs::create_dir_all(&self.limits.scratch_dir).await?;
        let output = tempfile::Builder::new()
            .prefix(".convert-")
            .tempfile_in(&self.limits.scratch_dir)?
            .into_temp_path();
        let max = self.limits.max_output_bytes;
        let mut cmd = Command::new(&self.limits.ffmpeg);
        cmd.args(["-hide_banner", "-nostdin", "-loglevel", "error", "-y", "-i"])
            .arg(input)
            .args(target.args())
            .arg("-fs")
            .arg(max.saturating_add(1).to_string())
            .arg(&*output)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(err) => {
                self.forget_probe().await;
                return Err(ConvertError::NotRunnable(format!(
                    "{} cannot be run: {err}",
                    self.limits.ffmpeg.display()
                )));
            }
        };
        let timeout = Duration::from_millis(self.limits.timeout_ms);
        // On timeout the future (and with it the child) is dropped: kill_on_drop kills the process.
        let outcome = tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .map_err(|_| ConvertError::TimedOut(self.limits.timeout_ms))??;
        if !outcome.status.success() {
            let stderr = String::from_utf8_lossy(&outcome.stderr);
            let reason = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("ffmpeg failed")
                .trim()
                // The caller sees the complaint, not where the node keeps its files.
                .replace(&*input.to_string_lossy(), "input")
                .replace(&*output.to_string_lossy(), "output");
            return Err(ConvertError::BadInput(reason));
        }
        let size = tokio::fs::metadata(&output).await?.len();
        if size > max {
            return Err(ConvertError::OutputTooLarge(max));
        }
        if size == 0 {
            return Err(ConvertError::BadInput("ffmpeg produced no output".into()));
        }
        Ok(Converted {
            file: output,
            mimetype: target.mimetype(),
        })
    }
}

/// Whether a declared mimetype is already what phones play as a voice note: Opus, or an Ogg container
/// without a codec named (voice notes are Ogg/Opus, and clients commonly declare them as bare `audio/ogg`).
pub(crate) fn is_opus(mimetype: &str) -> bool {
    let m = mimetype.to_ascii_lowercase();
    let essence = m.split(';').next().unwrap_or_default().trim();
    m.contains("opus") || (essence == "audio/ogg" && !m.contains("codecs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(ffmpeg: &str, dir: &Path) -> ConvertLimits {
        ConvertLimits {
            enabled: true,
            ffmpeg: ffmpeg.into(),
            concurrency: 1,
            queue: 0,
            timeout_ms: 300,
            max_output_bytes: 1024,
            scratch_dir: dir.to_path_buf(),
        }
    }

    /// An executable shell script named `name` in `dir` that stands in for ffmpeg and runs `body`.
    fn stand_in_ffmpeg(dir: &Path, name: &str, body: &str) -> PathBuf {
        let script = dir.join(name);
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        script
    }

    #[tokio::test]
    async fn a_missing_binary_is_not_runnable_and_disabled_is_disabled() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Converter::new(limits("/nonexistent/ffmpeg", dir.path()));
        assert!(matches!(
            missing.check().await,
            Err(ConvertError::NotRunnable(_))
        ));
        let mut off = limits("ffmpeg", dir.path());
        off.enabled = false;
        assert!(matches!(
            Converter::new(off).check().await,
            Err(ConvertError::Disabled)
        ));
    }

    #[tokio::test]
    async fn one_probe_vouches_for_a_burst_until_the_binary_fails_to_start() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in "ffmpeg" that counts its -version probes.
        let probes = dir.path().join("probes");
        let script = stand_in_ffmpeg(
            dir.path(),
            "counting-ffmpeg",
            &format!("echo probe >> {}\nexit 0", probes.display()),
        );
        let converter = Converter::new(limits(script.to_str().unwrap(), dir.path()));
        let burst: Vec<_> = (0..8)
            .map(|_| {
                let c = converter.clone();
                tokio::spawn(async move { c.check().await })
            })
            .collect();
        for check in burst {
            assert!(check.await.unwrap().is_ok());
        }
        assert!(converter.check().await.is_ok());
        let counted = std::fs::read_to_string(&probes).unwrap();
        assert_eq!(counted.lines().count(), 1, "one probe for nine checks");

        // The binary goes away: the conversion that cannot start it withdraws the probe's word.
        std::fs::remove_file(&script).unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, b"x").unwrap();
        assert!(matches!(
            converter.convert(&input, Target::Voice).await,
            Err(ConvertError::NotRunnable(_))
        ));
        assert!(matches!(
            converter.check().await,
            Err(ConvertError::NotRunnable(_))
        ));
    }

    #[tokio::test]
    async fn a_slow_child_is_killed_at_the_timeout_and_a_second_is_refused_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in "ffmpeg" that answers -version and otherwise hangs, recording its pid.
        let pidfile = dir.path().join("pid");
        let script = stand_in_ffmpeg(
            dir.path(),
            "slow-ffmpeg",
            &format!(
                "[ \"$1\" = -version ] && exit 0\necho $$ > {}\nexec sleep 30",
                pidfile.display()
            ),
        );
        let converter = Converter::new(limits(script.to_str().unwrap(), dir.path()));
        let input = dir.path().join("in");
        std::fs::write(&input, b"x").unwrap();
        let first = {
            let c = converter.clone();
            let input = input.clone();
            tokio::spawn(async move { c.convert(&input, Target::Voice).await })
        };
        while !pidfile.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(matches!(
            converter.convert(&input, Target::Voice).await,
            Err(ConvertError::QueueFull)
        ));
        assert!(matches!(
            first.await.unwrap(),
            Err(ConvertError::TimedOut(300))
        ));
        let pid = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .to_string();
        // The killed child is gone (reaped by tokio's orphan reaper shortly after the kill).
        let mut gone = false;
        for _ in 0..200 {
            if !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
            {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "the timed-out child {pid} still runs");
        assert_eq!(converter.admitted.load(Ordering::Acquire), 0);
    }
}
