//! One session's Chromium process tree, read from `/proc`: which processes belong to it (descendants of
//! the browser process, plus anything carrying the session's own profile path, which catches helpers that
//! re-parented), how much memory they use, and killing them all. Linux only, like the deployment.

use std::collections::{HashMap, HashSet};
use std::fs;

/// Memory of a process set, in bytes. `pss` shares pages fairly between processes (the honest per-session
/// figure); `rss` counts shared pages once per process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    pub rss_bytes: u64,
    pub pss_bytes: u64,
}

/// `(pid, ppid, state)` from `/proc/<pid>/stat`; the command name may contain spaces and parentheses.
fn stat(pid: u32) -> Option<(u32, char)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

fn all_pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether `pid` is a live process (a zombie waiting to be reaped is not).
pub fn is_alive(pid: u32) -> bool {
    matches!(stat(pid), Some((_, state)) if state != 'Z' && state != 'X')
}

/// `root` and all its live descendants.
pub fn tree(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in all_pids() {
        if let Some((ppid, state)) = stat(pid)
            && state != 'Z'
        {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if is_alive(pid) {
            out.push(pid);
        }
        if let Some(kids) = children.get(&pid) {
            todo.extend(kids);
        }
    }
    out
}

/// Live processes whose command line contains `marker` (the session's profile path).
pub fn with_marker(marker: &str) -> Vec<u32> {
    let marker = marker.as_bytes();
    all_pids()
        .into_iter()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.windows(marker.len()).any(|w| w == marker))
                .unwrap_or(false)
                && is_alive(*pid)
        })
        .collect()
}

/// A session's processes: the browser's tree and anything naming its profile.
pub fn session_processes(browser_pid: Option<u32>, profile_marker: &str) -> Vec<u32> {
    let mut set: HashSet<u32> = browser_pid
        .map(tree)
        .unwrap_or_default()
        .into_iter()
        .collect();
    set.extend(with_marker(profile_marker));
    let mut pids: Vec<u32> = set.into_iter().collect();
    pids.sort_unstable();
    pids
}

/// Sends SIGKILL to every pid (already gone is fine).
pub fn kill_all(pids: &[u32]) {
    for &pid in pids {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            continue;
        };
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pids are this
        // session's Chromium processes, found through its own browser pid and profile path.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Summed memory of `pids` from `smaps_rollup`.
pub fn memory(pids: &[u32]) -> Memory {
    let mut total = Memory::default();
    for pid in pids {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
            continue;
        };
        for line in text.lines() {
            let kib = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            };
            if let Some(v) = kib("Rss:") {
                total.rss_bytes += v * 1024;
            } else if let Some(v) = kib("Pss:") {
                total.pss_bytes += v * 1024;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_process() {
        let me = std::process::id();
        assert!(is_alive(me));
        assert!(tree(me).contains(&me));
        let mem = memory(&[me]);
        assert!(mem.rss_bytes > 0 && mem.pss_bytes > 0);
    }
}
