//! Where log lines go: every thread appends its formatted line to one shared buffer, and a thread of its own
//! writes that buffer out in batches. Only the first line into an empty buffer wakes the writer, which then
//! lets the batch gather for a few milliseconds; past the buffer's bound a logger waits for the writer, so no
//! line is dropped. Lines logged after the writer stopped are written directly.
//!
//! Why not tracing-appender's non-blocking writer: its queue is a ring of slots allocated and written when it
//! is made, resident for the process's life whether or not anything logs (256 KiB at the 8,192 lines we
//! bounded it to; 4 MB at its default), where this buffer grows only as far as a burst fills it. An idle
//! node held 0.5-0.8 MB less with it; reads at `LOG_LEVEL=info` were the same (docs "Measured", session 21).

use std::io::Write;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How long a batch gathers after its first line: the delay a line can see before it is written.
const GATHER: Duration = Duration::from_millis(10);

/// Buffered bytes past which loggers wait for the writer (at ~200 bytes a line, about 1,300 lines: 26 ms
/// of access lines at 50,000 requests/s, more than one batch). The buffer grows only as far as it is used.
const DEFAULT_BOUND: usize = 256 * 1024;

struct Pending {
    bytes: Vec<u8>,
    stopped: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    /// The writer waits here for a first line, a full buffer or the stop.
    wake: Condvar,
    /// Loggers wait here for room when the buffer is full.
    room: Condvar,
    bound: usize,
}

/// The `MakeWriter` handed to the log layers; cheap to clone.
#[derive(Clone)]
pub struct BatchedWriter {
    shared: Arc<Shared>,
}

/// Stops the writer thread when dropped, after it has written every line buffered so far.
#[must_use = "dropping the guard stops the log writer"]
pub struct WriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the writer thread (named `thread_name`) that writes the batches to `out`.
pub fn spawn(
    out: impl Write + Send + 'static,
    thread_name: &str,
) -> std::io::Result<(BatchedWriter, WriterGuard)> {
    spawn_bounded(out, thread_name, DEFAULT_BOUND)
}

fn spawn_bounded(
    mut out: impl Write + Send + 'static,
    thread_name: &str,
    bound: usize,
) -> std::io::Result<(BatchedWriter, WriterGuard)> {
    let shared = Arc::new(Shared {
        pending: Mutex::new(Pending {
            bytes: Vec::new(),
            stopped: false,
        }),
        wake: Condvar::new(),
        room: Condvar::new(),
        bound,
    });
    let for_thread = shared.clone();
    let thread = std::thread::Builder::new()
        .name(thread_name.to_owned())
        .spawn(move || write_batches(&for_thread, &mut out))?;
    let guard = WriterGuard {
        shared: shared.clone(),
        thread: Some(thread),
    };
    Ok((BatchedWriter { shared }, guard))
}

fn write_batches(shared: &Shared, out: &mut impl Write) {
    let mut batch = Vec::new();
    loop {
        let stopped = {
            let mut pending = shared.pending.lock();
            while pending.bytes.is_empty() && !pending.stopped {
                shared.wake.wait(&mut pending);
            }
            let deadline = Instant::now() + GATHER;
            while !pending.stopped && pending.bytes.len() < shared.bound {
                if shared.wake.wait_until(&mut pending, deadline).timed_out() {
                    break;
                }
            }
            std::mem::swap(&mut pending.bytes, &mut batch);
            pending.stopped
        };
        shared.room.notify_all();
        // Nowhere to report a failed write of the log itself; the next batch tries again.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        if stopped {
            return;
        }
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        self.shared.pending.lock().stopped = true;
        self.shared.wake.notify_one();
        self.shared.room.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Write for &BatchedWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let shared = &self.shared;
        let mut pending = shared.pending.lock();
        while pending.bytes.len() >= shared.bound && !pending.stopped {
            shared.wake.notify_one();
            shared.room.wait(&mut pending);
        }
        if pending.stopped {
            drop(pending);
            return std::io::stdout().lock().write(line);
        }
        let first = pending.bytes.is_empty();
        pending.bytes.extend_from_slice(line);
        drop(pending);
        if first {
            shared.wake.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchedWriter {
    type Writer = &'a BatchedWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::spawn_bounded;

    /// An output the test can read back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_arrives_whole_and_in_order_past_the_bound() {
        let out = Captured::default();
        // A bound of a few lines, so loggers keep waiting for the writer.
        let (writer, guard) = spawn_bounded(out.clone(), "test-log", 64).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for n in 0..2_000 {
                        (&writer)
                            .write_all(format!("thread {t} line {n}\n").as_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(guard);
        let text = String::from_utf8(out.0.lock().clone()).unwrap();
        for t in 0..4 {
            let mine: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("thread {t} line ")))
                .map(|n| n.parse().unwrap())
                .collect();
            assert_eq!(mine, (0..2_000).collect::<Vec<_>>(), "thread {t}");
        }
        assert_eq!(text.lines().count(), 8_000);
    }

    #[test]
    fn a_lone_line_is_written_without_more_following() {
        let out = Captured::default();
        let (writer, _guard) = spawn_bounded(out.clone(), "test-log", 1024).unwrap();
        (&writer).write_all(b"only line\n").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while out.0.lock().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(out.0.lock().as_slice(), b"only line\n");
    }
}
