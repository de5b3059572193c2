//! The Chromium profile is the session's credential: it lives in the session's own directory (deleted
//! with the session), is archived to bytes on stop so the node can store it, and is restored from those
//! bytes on another node so a takeover links without a new QR. Caches are left out of the archive.

use std::fs;
use std::io;
use std::path::Path;

/// Profile parts that are pure cache or process state: rebuilt by Chromium, never part of the link.
const SKIPPED: &[&str] = &[
    "Cache",
    "Code Cache",
    "GPUCache",
    "GrShaderCache",
    "GraphiteDawnCache",
    "ShaderCache",
    "DawnGraphiteCache",
    "DawnWebGPUCache",
    "Crashpad",
    "Service Worker/CacheStorage",
    "Service Worker/ScriptCache",
    "SingletonLock",
    "SingletonSocket",
    "SingletonCookie",
    "BrowserMetrics",
    "component_crx_cache",
];

fn skipped(rel: &Path) -> bool {
    // Checked at every level before descending, so a skipped directory hides its content.
    SKIPPED.iter().any(|s| rel.ends_with(s))
}

fn add_dir(tar: &mut tar::Builder<impl io::Write>, root: &Path, dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        if skipped(rel) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            add_dir(tar, root, &path)?;
        } else if kind.is_file() {
            // A file Chromium removed between listing and reading is not an error.
            match fs::File::open(&path) {
                Ok(mut file) => tar.append_file(rel, &mut file)?,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
    }
    Ok(())
}

/// A gzip'd tar of the profile at `dir` (no caches). Call with the browser stopped.
pub fn archive(dir: &Path) -> io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    if dir.exists() {
        add_dir(&mut tar, dir, dir)?;
    }
    tar.into_inner()?.finish()
}

/// Replaces the profile at `dir` with an archive's content.
pub fn restore(dir: &Path, archive: &[u8]) -> io::Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    fs::create_dir_all(dir)?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    // `unpack` refuses entries escaping `dir` (absolute paths, `..`).
    tar.unpack(dir)
}

/// Whether `dir` holds a profile Chromium wrote before (a link may be stored in it).
pub fn exists(dir: &Path) -> bool {
    dir.join("Default").is_dir()
}

/// Removes the profile (the credential) for good.
pub fn delete(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_round_trips_without_caches() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("Default/IndexedDB")).unwrap();
        fs::create_dir_all(src.path().join("Default/Cache")).unwrap();
        fs::write(src.path().join("Default/IndexedDB/db"), b"link").unwrap();
        fs::write(src.path().join("Default/Cache/blob"), b"cache").unwrap();
        let bytes = archive(src.path()).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let target = dst.path().join("p");
        restore(&target, &bytes).unwrap();
        assert_eq!(
            fs::read(target.join("Default/IndexedDB/db")).unwrap(),
            b"link"
        );
        assert!(!target.join("Default/Cache").exists());
        assert!(exists(&target));
        delete(&target).unwrap();
        assert!(!target.exists());
    }
}
