//! One bounded ffmpeg or ffprobe process: its address space, CPU time and output file size are
//! capped by the kernel (resource limits set in the child before it runs the program), no core
//! dump is written (it would hold the contact's media), and it is killed when its wall-clock
//! time runs out or its future is dropped (the turn's deadline and abort).

use std::path::Path;
use std::process::{Output, Stdio};

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use tokio::process::Command;

use super::MediaError;
use super::limits::MediaLimits;

/// The largest file a process may write: a frame or a cut soundtrack is far smaller.
pub const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;

/// `program` with its limits: stdin, stdout and stderr closed unless the caller pipes one.
pub fn command(program: &Path, limits: &MediaLimits) -> Command {
    let caps = [
        (Resource::As, limits.process_memory),
        (
            Resource::Cpu,
            limits.process_time.as_secs_f64().ceil() as u64,
        ),
        (Resource::Fsize, MAX_OUTPUT_BYTES),
        (Resource::Core, 0),
    ]
    // Never above the hard limit the service itself runs under (raising it would fail).
    .map(|(resource, cap)| {
        let hard = getrlimit(resource).maximum;
        let cap = hard.map_or(cap, |hard| cap.min(hard));
        (resource, cap)
    });
    let mut command = Command::new(program);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Fewer malloc arenas: the address-space cap counts each one reserved.
        .env("MALLOC_ARENA_MAX", "2")
        .kill_on_drop(true);
    // SAFETY: the closure runs in the child between fork and exec; it only makes setrlimit
    // system calls (async-signal-safe, no allocation, no lock) on values computed above.
    unsafe {
        command.pre_exec(move || {
            for (resource, cap) in caps {
                setrlimit(
                    resource,
                    Rlimit {
                        current: Some(cap),
                        maximum: Some(cap),
                    },
                )?;
            }
            Ok(())
        });
    }
    command
}

/// Runs `command` to its end within the wall-clock limit. Past it the child is killed (its
/// handle is dropped with `kill_on_drop`) and the run is [`MediaError::Timeout`].
///
/// The limit is real time, kept by a blocking thread that the process's end (or the drop of
/// this future) wakes at once: a process runs in real time whatever tokio's clock does, and
/// while it runs a paused test clock does not jump ahead over the turn's own timers.
pub async fn run(mut command: Command, limits: &MediaLimits) -> Result<Output, MediaError> {
    let child = command.spawn().map_err(|_| MediaError::Ffmpeg)?;
    let (finished, wait) = std::sync::mpsc::channel::<()>();
    let limit = limits.process_time;
    let timer = tokio::task::spawn_blocking(move || {
        matches!(
            wait.recv_timeout(limit),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        )
    });
    tokio::select! {
        output = child.wait_with_output() => {
            drop(finished);
            output.map_err(|_| MediaError::Ffmpeg)
        }
        timed_out = timer => match timed_out {
            Ok(true) => Err(MediaError::Timeout),
            _ => Err(MediaError::Ffmpeg),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::time::Duration;

    /// A stand-in program in a new folder: `name`, executable, running the shell `script`, in
    /// which `{note}` stands for the path of the file `note` in that folder (where the program
    /// leaves what the test reads). The folder, the program and the note's path.
    pub(crate) fn stand_in(
        name: &str,
        note: &str,
        script: &str,
    ) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let note = dir.path().join(note);
        let program = dir.path().join(name);
        let script = script.replace("{note}", &note.display().to_string());
        std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o700)).unwrap();
        (dir, program, note)
    }

    /// Whether process `pid` has ended (gone, or a zombie awaiting its reaper).
    pub(crate) fn ended(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    /// A few real milliseconds on a blocking thread (the child runs in real time).
    pub(crate) async fn pause() {
        let _ = tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(5))).await;
    }

    #[tokio::test]
    async fn hostile_media_each_process_runs_under_memory_cpu_file_size_and_core_limits() {
        let (_dir, program, out) = stand_in(
            "stand-in",
            "limits",
            "echo $(ulimit -v) $(ulimit -t) $(ulimit -f) $(ulimit -c) > '{note}'",
        );
        let limits = MediaLimits {
            process_memory: 256 * 1024 * 1024,
            process_time: Duration::from_millis(7_500),
            ..MediaLimits::default()
        };
        let output = run(command(&program, &limits), &limits).await.unwrap();
        assert!(output.status.success());
        // The shell reports KiB for memory, seconds for CPU, 512-byte blocks for file size.
        let reported = std::fs::read_to_string(&out).unwrap();
        let expected = format!("{} 8 {} 0", 256 * 1024, MAX_OUTPUT_BYTES / 512);
        assert_eq!(reported.trim(), expected);
    }

    #[tokio::test]
    async fn hostile_media_a_process_over_its_time_limit_is_killed() {
        // A program that never finishes: it notes its pid, then waits forever.
        let (_dir, program, pid_file) =
            stand_in("stand-in", "pid", "echo $$ > '{note}'\nexec sleep 600");
        // The limit is real time (a process ignores tokio's clock): a short one.
        let limits = MediaLimits {
            process_time: Duration::from_millis(300),
            ..MediaLimits::default()
        };
        let started = std::time::Instant::now();
        let result = run(command(&program, &limits), &limits).await;
        assert!(matches!(result, Err(MediaError::Timeout)), "{result:?}");
        assert!(started.elapsed() >= limits.process_time);
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        for _ in 0..400 {
            if ended(pid.trim()) {
                return;
            }
            pause().await;
        }
        panic!("the process outlived its time limit");
    }
}
