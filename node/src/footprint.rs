//! What an idle node keeps resident once it has booted. Boot builds the route table, the OpenAPI document
//! and the migrations once; the heap it freed and the code only it ran would otherwise stay charged to the
//! process for its whole life.

/// Hands boot's freed heap pages back to the kernel (glibc keeps freed memory in its arenas until asked;
/// SQLite allocates there) and lets the kernel reclaim the binary's code pages that boot touched. Code
/// pages are clean and file-backed: the kernel pages them out without writing anything, and whatever runs
/// again faults its pages back in from the binary, so only the code a running node uses stays resident.
pub(crate) fn release_boot_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers; it only returns whole free pages of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    page_out_code();
}

/// `MADV_PAGEOUT` over the read-only mappings of the process's own executable (Linux 5.4+; older kernels
/// refuse the advice and nothing changes).
#[cfg(target_os = "linux")]
fn page_out_code() {
    let (Ok(exe), Ok(maps)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_to_string("/proc/self/maps"),
    ) else {
        return;
    };
    let Some(exe) = exe.to_str() else { return };
    for (start, end) in maps.lines().filter_map(|line| code_range(line, exe)) {
        // SAFETY: the range is a whole mapping of this process, read from /proc/self/maps; the advice
        // changes only when its clean, file-backed pages are resident, never their contents.
        unsafe {
            let (addr, len) = (start as *mut libc::c_void, end - start);
            libc::madvise(addr, len, libc::MADV_RANDOM);
            libc::madvise(addr, len, libc::MADV_PAGEOUT);
        }
    }
}

/// The address range of a `/proc/self/maps` line when it maps `exe` without write permission.
#[cfg(target_os = "linux")]
fn code_range(line: &str, exe: &str) -> Option<(usize, usize)> {
    let mut fields = line.split_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    if perms.contains('w') || fields.nth(3)? != exe {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    (end > start).then_some((start, end))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::code_range;

    #[test]
    fn only_read_only_mappings_of_the_executable_are_paged_out() {
        let exe = "/usr/bin/wagate";
        let text = "5581c2a00000-5581c5e00000 r-xp 01400000 08:01 1234 /usr/bin/wagate";
        assert_eq!(
            code_range(text, exe),
            Some((0x5581c2a00000, 0x5581c5e00000))
        );
        let data = "5581c6000000-5581c6100000 rw-p 04c00000 08:01 1234 /usr/bin/wagate";
        assert_eq!(code_range(data, exe), None);
        let other = "7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6";
        assert_eq!(code_range(other, exe), None);
        assert_eq!(
            code_range("7ffd0000-7ffd1000 rw-p 00000000 00:00 0", exe),
            None
        );
    }
}
