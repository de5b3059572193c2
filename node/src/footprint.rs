//! What an idle node keeps resident. Boot builds the route table, the OpenAPI document and the migrations
//! once; later, code runs once too (a pool's new connection, a first statement, a WAL checkpoint). The heap
//! such work freed and the code only it ran would otherwise stay charged to the process for its whole life.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often the node gives back what ran once since the last time. What runs all the time (the runtime,
/// and its periodic duties) maps its pages again at once; under load that is a few hundred minor faults per
/// period, well under a millisecond.
const RELEASE_EVERY: Duration = Duration::from_secs(30);

/// How long requests must have stopped before the node gives back what they touched. A node probed now and
/// then (a health check, a dashboard's poll) otherwise kept the code and heap of its first request mapped
/// until the next periodic release: 22-27 MB for up to 30 s after one probe, against ~15 MB before it.
const QUIET_AFTER_REQUESTS: Duration = Duration::from_secs(2);

/// The process's requests, as the release task sees them.
static REQUESTS: RequestActivity = RequestActivity::new();

/// Called once per request (`http/observe.rs`).
pub(crate) fn note_request() {
    REQUESTS.note();
}

/// Whether a request came since the release task last looked, and the wake-up of that task when the node
/// goes from quiet to serving. Under load a request costs one relaxed load of a flag that stays set.
struct RequestActivity {
    seen: AtomicBool,
    resumed: Notify,
}

impl RequestActivity {
    const fn new() -> RequestActivity {
        RequestActivity {
            seen: AtomicBool::new(false),
            resumed: Notify::const_new(),
        }
    }

    fn note(&self) {
        if !self.seen.load(Ordering::Relaxed) {
            self.seen.store(true, Ordering::Relaxed);
            self.resumed.notify_one();
        }
    }

    /// Returns once a whole [`QUIET_AFTER_REQUESTS`] passed without a request. Under steady traffic it never
    /// does, and nothing is released while it lasts: what requests run would only be mapped again.
    async fn stopped(&self) {
        loop {
            self.seen.store(false, Ordering::Relaxed);
            tokio::time::sleep(QUIET_AFTER_REQUESTS).await;
            if !self.seen.load(Ordering::Relaxed) {
                break;
            }
        }
        // The window's requests left a wake-up behind, stale now; one that came after the last look keeps it.
        let stale = std::pin::pin!(self.resumed.notified());
        let _ = futures::FutureExt::now_or_never(stale);
        if self.seen.load(Ordering::Relaxed) {
            self.resumed.notify_one();
        }
    }
}

/// Hands freed heap pages back to the kernel (glibc keeps freed memory in its arenas until asked; SQLite
/// allocates there) and unmaps the pages of the binary that a file can give back.
pub(crate) fn release_idle_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers; it only returns whole free pages of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    unmap_clean_code();
}

/// [`release_idle_memory`] every [`RELEASE_EVERY`] while no request comes, and once requests have stopped for
/// [`QUIET_AFTER_REQUESTS`], until shutdown. Measured on an idle node (docs "Measured"): once boot's code was
/// dropped, the code of one-time work after it kept the resident set growing from 23 to 29 MB in the first
/// minute.
pub(crate) async fn release_periodically(shutdown: CancellationToken) {
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + RELEASE_EVERY, RELEASE_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => release_off_the_workers().await,
            _ = REQUESTS.resumed.notified() => {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = REQUESTS.stopped() => {
                        release_off_the_workers().await;
                        tick.reset();
                    }
                }
            }
        }
    }
}

/// Off the runtime's workers: reading `/proc/self/smaps` walks the page tables of every mapping, a few
/// milliseconds a request on that worker would otherwise wait out.
async fn release_off_the_workers() {
    let _ = tokio::task::spawn_blocking(release_idle_memory).await;
}

/// `MADV_DONTNEED` over the read-only mappings of the process's own binary that hold no private copy of a
/// page (`Anonymous: 0 kB` in `/proc/self/smaps`, read again each time, as a debugger's breakpoint makes
/// one): the code, and the read-only data before it (symbol and relocation tables the loader read once,
/// constants, unwind tables). Their pages leave this process's page tables and stay in the kernel's file
/// cache, so what runs or is read again maps its page back from memory (a minor fault, no disk read). A mapping with private pages is left alone: the relocated read-only data
/// (`.data.rel.ro`) was written once at load, and the advice would throw those writes away.
/// `MADV_PAGEOUT`, which also evicts the pages from the file cache, kept less resident (the kernel maps up to
/// 64 KiB around a fault from the cache) but made every node later started from the same binary read them
/// back from disk, one page at a time under `MADV_RANDOM`: under the test suite's I/O a session start took
/// over 30 s.
#[cfg(target_os = "linux")]
fn unmap_clean_code() {
    let (Ok(exe), Ok(smaps)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_to_string("/proc/self/smaps"),
    ) else {
        return;
    };
    let Some(exe) = exe.to_str() else { return };
    for (start, end) in clean_read_only_ranges(&smaps, exe) {
        // SAFETY: the range is a whole read-only mapping of this process's binary with no private page
        // (read from /proc/self/smaps just now; only a debugger writes to such a mapping): dropping its
        // pages loses nothing, the next access maps the same file page again.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The address ranges of the mappings in `smaps` text that are read-only mappings of `exe` without a
/// private (anonymous) page.
#[cfg(target_os = "linux")]
fn clean_read_only_ranges(smaps: &str, exe: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping_header(line) {
            current = range.filter(|_| read_only_mapping_of(line, exe));
        } else if let (Some(range), Some(kb)) = (current, line.strip_prefix("Anonymous:")) {
            if kb.trim() == "0 kB" {
                ranges.push(range);
            }
            current = None;
        }
    }
    ranges
}

/// For a mapping's header line (`start-end perms offset dev inode [path]`): `Some` with its range when the
/// range parses; `None` for the field lines that follow it (`Rss:   12 kB`, ...).
#[cfg(target_os = "linux")]
fn mapping_header(line: &str) -> Option<Option<(usize, usize)>> {
    let range = line.split_whitespace().next()?;
    let (start, end) = range.split_once('-')?;
    let is_hex = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_hex(start) || !is_hex(end) {
        return None;
    }
    let start = usize::from_str_radix(start, 16).ok();
    let end = usize::from_str_radix(end, 16).ok();
    Some(start.zip(end).filter(|(start, end)| end > start))
}

/// Whether a header line is a read-only (`r--p` or `r-xp`) mapping of `exe`. The path is the rest of the
/// line from its first `/` (no field before it has one), so a path with spaces, or the ` (deleted)` the
/// kernel appends to both once the binary was replaced, still matches.
#[cfg(target_os = "linux")]
fn read_only_mapping_of(line: &str, exe: &str) -> bool {
    let perms = line.split_whitespace().nth(1);
    let path = line.find('/').map(|at| &line[at..]);
    matches!(perms, Some("r--p" | "r-xp")) && path == Some(exe)
}

#[cfg(test)]
mod quiet_tests {
    use std::time::Duration;

    use super::{QUIET_AFTER_REQUESTS, RequestActivity};

    async fn advance(by: Duration) {
        tokio::time::advance(by).await;
        tokio::task::yield_now().await;
    }

    #[tokio::test(start_paused = true)]
    async fn one_request_is_followed_by_a_release_once_quiet() {
        static ACTIVITY: RequestActivity = RequestActivity::new();
        ACTIVITY.note();
        ACTIVITY.resumed.notified().await;
        let stopped = tokio::spawn(ACTIVITY.stopped());
        // Let it start its wait at the current (paused) time.
        tokio::task::yield_now().await;
        advance(QUIET_AFTER_REQUESTS - Duration::from_millis(100)).await;
        assert!(!stopped.is_finished());
        advance(Duration::from_millis(200)).await;
        assert!(stopped.is_finished());
        // Nothing came since: no wake-up is left for the release task.
        let next = std::pin::pin!(ACTIVITY.resumed.notified());
        assert!(futures::FutureExt::now_or_never(next).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn steady_requests_hold_the_release_off() {
        static ACTIVITY: RequestActivity = RequestActivity::new();
        ACTIVITY.note();
        let stopped = tokio::spawn(ACTIVITY.stopped());
        // Let it start its wait at the current (paused) time.
        tokio::task::yield_now().await;
        for _ in 0..20 {
            advance(Duration::from_millis(500)).await;
            ACTIVITY.note();
        }
        assert!(!stopped.is_finished());
        // The window the last request fell in ends, then a whole quiet one.
        for _ in 0..2 {
            advance(QUIET_AFTER_REQUESTS + Duration::from_millis(100)).await;
        }
        assert!(stopped.is_finished());
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::clean_read_only_ranges;

    const EXE: &str = "/usr/bin/wagate";

    fn mapping(header: &str, anonymous_kb: u32) -> String {
        format!(
            "{header}\nSize:  1024 kB\nRss:  512 kB\nAnonymous:  {anonymous_kb} kB\nVmFlags: rd mr\n"
        )
    }

    #[test]
    fn only_clean_read_only_mappings_of_the_binary_are_dropped() {
        let smaps = [
            mapping(
                "5581c2000000-5581c2a00000 r--p 00000000 08:01 1234 /usr/bin/wagate",
                0,
            ),
            mapping(
                "5581c2a00000-5581c5e00000 r-xp 01400000 08:01 1234 /usr/bin/wagate",
                0,
            ),
            // `.data.rel.ro`: relocated at load, so it holds private pages.
            mapping(
                "5581c5e00000-5581c5f00000 r--p 04a00000 08:01 1234 /usr/bin/wagate",
                1704,
            ),
            mapping(
                "5581c6000000-5581c6100000 rw-p 04c00000 08:01 1234 /usr/bin/wagate",
                0,
            ),
            mapping(
                "7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6",
                0,
            ),
            mapping("7ffd0000-7ffd1000 rw-p 00000000 00:00 0", 4),
        ]
        .concat();
        assert_eq!(
            clean_read_only_ranges(&smaps, EXE),
            vec![
                (0x5581c2000000, 0x5581c2a00000),
                (0x5581c2a00000, 0x5581c5e00000)
            ]
        );
    }

    #[test]
    fn a_path_with_spaces_or_a_replaced_binary_still_matches() {
        let exe = "/opt/wa gate/wagate (deleted)";
        let smaps = mapping(
            "5581c2a00000-5581c5e00000 r-xp 01400000 08:01 1234       /opt/wa gate/wagate (deleted)",
            0,
        );
        assert_eq!(
            clean_read_only_ranges(&smaps, exe),
            vec![(0x5581c2a00000, 0x5581c5e00000)]
        );
    }

    #[test]
    fn a_mapping_whose_anonymous_line_is_missing_is_left_alone() {
        let smaps =
            "5581c2a00000-5581c5e00000 r-xp 01400000 08:01 1234 /usr/bin/wagate\nRss: 4 kB\n";
        assert!(clean_read_only_ranges(smaps, EXE).is_empty());
    }
}
