//! What an idle node keeps resident once it has booted. Boot builds the route table, the OpenAPI document
//! and the migrations once; the heap it freed and the code only it ran would otherwise stay charged to the
//! process for its whole life.

/// Hands boot's freed heap pages back to the kernel (glibc keeps freed memory in its arenas until asked;
/// SQLite allocates there) and unmaps the binary's code pages that boot touched.
pub(crate) fn release_boot_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers; it only returns whole free pages of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    unmap_boot_code();
}

/// `MADV_DONTNEED` over the executable mappings of the process's own binary: their pages leave this
/// process's page tables and stay in the kernel's file cache, so code that runs again maps its page back
/// from memory (a minor fault, no disk read). Only executable mappings: they are never written, whereas the
/// relocated read-only data beside them is private memory that the advice would throw away.
/// `MADV_PAGEOUT`, which also evicts the pages from the file cache, kept less resident (the kernel maps up to
/// 64 KiB around a fault from the cache) but made every node later started from the same binary read them
/// back from disk, one page at a time under `MADV_RANDOM`: under the test suite's I/O a session start took
/// over 30 s.
#[cfg(target_os = "linux")]
fn unmap_boot_code() {
    let (Ok(exe), Ok(maps)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_to_string("/proc/self/maps"),
    ) else {
        return;
    };
    let Some(exe) = exe.to_str() else { return };
    for (start, end) in maps.lines().filter_map(|line| code_range(line, exe)) {
        // SAFETY: the range is a whole executable mapping of this process's binary, read from
        // /proc/self/maps and never written: dropping its pages loses nothing, the next access maps the same
        // file page again.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The address range of a `/proc/self/maps` line when it is an executable, read-only mapping of `exe`.
/// The path is the rest of the line from its first `/` (no field before it has one), so a path with spaces,
/// or the ` (deleted)` the kernel appends to both once the binary was replaced, still matches.
#[cfg(target_os = "linux")]
fn code_range(line: &str, exe: &str) -> Option<(usize, usize)> {
    let mut fields = line.split_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    let path = &line[line.find('/')?..];
    if perms != "r-xp" || path != exe {
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
    fn only_the_executable_mappings_of_the_binary_are_dropped() {
        let exe = "/usr/bin/wagate";
        let text = "5581c2a00000-5581c5e00000 r-xp 01400000 08:01 1234 /usr/bin/wagate";
        assert_eq!(
            code_range(text, exe),
            Some((0x5581c2a00000, 0x5581c5e00000))
        );
        let relro = "5581c5e00000-5581c5f00000 r--p 04a00000 08:01 1234 /usr/bin/wagate";
        assert_eq!(code_range(relro, exe), None);
        let data = "5581c6000000-5581c6100000 rw-p 04c00000 08:01 1234 /usr/bin/wagate";
        assert_eq!(code_range(data, exe), None);
        let other = "7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6";
        assert_eq!(code_range(other, exe), None);
        let spaced = "/opt/wa gate/wagate (deleted)";
        let line = "5581c2a00000-5581c5e00000 r-xp 01400000 08:01 1234       /opt/wa gate/wagate (deleted)";
        assert_eq!(
            code_range(line, spaced),
            Some((0x5581c2a00000, 0x5581c5e00000))
        );
        let anonymous = "7ffd0000-7ffd1000 rw-p 00000000 00:00 0";
        assert_eq!(code_range(anonymous, exe), None);
    }
}
