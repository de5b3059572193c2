//! What an idle node keeps resident. Boot builds the route table, the OpenAPI document and the migrations
//! once; later, code runs once too (a pool's new connection, a first statement, a WAL checkpoint). The heap
//! such work freed and the code only it ran would otherwise stay charged to the process for its whole life,
//! and so would the SQLite connections a burst opened (a thread each, with its own schema and caches).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;

/// How often the node looks whether it went quiet. An idle node wakes for it and makes one system call. It is
/// also about how long the rise after each periodic duty (its code mapped back) lasts before the release.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Minor page faults since the last release that make another worth it: a fault maps up to 64 KiB of the
/// binary back (the kernel's fault-around), or one page of heap.
const FAULTS_WORTH_A_RELEASE: u64 = 32;

/// Faults within one look that still count as quiet.
const QUIET_FAULTS: u64 = 4;

/// Whether a request came since the release task last looked. Under load a request costs one relaxed load
/// of a flag that stays set.
static REQUESTS_SEEN: AtomicBool = AtomicBool::new(false);

/// Called once per request (`http/observe.rs`).
pub(crate) fn note_request() {
    if !REQUESTS_SEEN.load(Ordering::Relaxed) {
        REQUESTS_SEEN.store(true, Ordering::Relaxed);
    }
}

/// What the release task saw in one look.
#[derive(Debug, Clone, Copy)]
struct Look {
    /// Minor faults since the previous look.
    recent_faults: u64,
    /// Minor faults since the last release.
    faults_since_release: u64,
    requests_seen: bool,
}

impl Look {
    /// Release once whatever ran (a request, a periodic duty, a pool's new connection) has mapped enough
    /// back and has stopped: under traffic what requests run would only be mapped again at once.
    fn calls_for_release(&self) -> bool {
        !self.requests_seen
            && self.recent_faults <= QUIET_FAULTS
            && self.faults_since_release >= FAULTS_WORTH_A_RELEASE
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

/// What boot leaves behind, released once before the node serves: the spare connections its concurrent
/// startup work opened, then [`release_idle_memory`].
pub(crate) async fn release_after_boot(pools: &[SqlitePool]) {
    wagate_db::close_spare_connections(pools).await;
    release_idle_memory();
}

/// [`release_idle_memory`] (and the pools' spare connections closed) whenever the node went quiet after
/// mapping pages back, until shutdown. Releases on a fixed 30 s period left a node probed once at 22-27 MB
/// until the next one, and a fixed period cannot follow the periodic duties, which map their code back after
/// each release (docs "Measured").
pub(crate) async fn release_when_quiet(pools: Vec<SqlitePool>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + LOOK_EVERY, LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut after_release = minor_faults();
    let mut previous = after_release;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let faults = minor_faults();
        let look = Look {
            recent_faults: faults.saturating_sub(previous),
            faults_since_release: faults.saturating_sub(after_release),
            requests_seen: REQUESTS_SEEN.swap(false, Ordering::Relaxed),
        };
        previous = faults;
        if look.calls_for_release() {
            wagate_db::close_spare_connections(&pools).await;
            release_off_the_workers().await;
            // The release's own faults (reading smaps, its thread) are not activity.
            after_release = minor_faults();
            previous = after_release;
        }
    }
}

/// The process's minor page faults so far (0 where `getrusage` is not available).
fn minor_faults() -> u64 {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `getrusage` fills the struct it is given; `RUSAGE_SELF` is always valid.
        let filled = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } == 0;
        if filled {
            // SAFETY: filled by the successful call above (and zeroed before it).
            let usage = unsafe { usage.assume_init() };
            return u64::try_from(usage.ru_minflt).unwrap_or(0);
        }
    }
    0
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
    use super::{FAULTS_WORTH_A_RELEASE, Look, QUIET_FAULTS};

    fn look(recent_faults: u64, faults_since_release: u64, requests_seen: bool) -> Look {
        Look {
            recent_faults,
            faults_since_release,
            requests_seen,
        }
    }

    #[test]
    fn a_quiet_node_that_mapped_pages_back_releases_them() {
        assert!(look(0, FAULTS_WORTH_A_RELEASE, false).calls_for_release());
        assert!(look(QUIET_FAULTS, 400, false).calls_for_release());
    }

    #[test]
    fn nothing_is_released_while_requests_come_or_pages_are_being_mapped() {
        assert!(!look(0, 400, true).calls_for_release());
        assert!(!look(QUIET_FAULTS + 1, 400, false).calls_for_release());
    }

    #[test]
    fn a_node_with_little_mapped_back_is_left_alone() {
        assert!(!look(0, FAULTS_WORTH_A_RELEASE - 1, false).calls_for_release());
    }

    #[test]
    fn faults_are_counted() {
        let before = super::minor_faults();
        // Past glibc's largest mmap threshold (32 MiB), so these are fresh pages whatever ran before.
        let touched = vec![1u8; 64 << 20];
        std::hint::black_box(&touched);
        assert!(super::minor_faults() > before);
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
