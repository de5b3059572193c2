//! `IncomingFile`: a blocking, size-capped temporary file under the media directory for engines whose
//! download code writes synchronously (the socket engine's library decrypts into a `Write + Seek` sink on
//! a blocking thread). The store adopts a finished file under its content address; a dropped one is
//! removed.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::{MediaError, StoredMedia};

pub(crate) struct IncomingFile {
    pub(super) path: PathBuf,
    file: std::fs::File,
    max: u64,
}

impl IncomingFile {
    pub(super) fn create(dir: &std::path::Path, max: u64) -> std::io::Result<IncomingFile> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!(".in-{}", uuid::Uuid::new_v4()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(IncomingFile { path, file, max })
    }

    /// Shortens the file (the downloader empties it before each attempt).
    pub(crate) fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)
    }

    /// Hashes what was written and renames the file to its content address.
    pub(super) fn finish(mut self, dir: &std::path::Path) -> Result<StoredMedia, MediaError> {
        self.file.flush()?;
        self.file.seek(SeekFrom::Start(0))?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = self.file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            size += n as u64;
            hasher.update(&buf[..n]);
        }
        let key = hex::encode(hasher.finalize());
        std::fs::rename(&self.path, dir.join(&key))?;
        Ok(StoredMedia {
            key,
            size,
            content_type: None,
        })
    }
}

impl Write for IncomingFile {
    /// Refuses to grow past `MEDIA_DOWNLOAD_MAX_BYTES`: the download fails instead of filling the disk.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let at = self.file.stream_position()?;
        if at.saturating_add(buf.len() as u64) > self.max {
            return Err(std::io::Error::other(MediaError::TooLarge(self.max)));
        }
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Seek for IncomingFile {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.file.seek(pos)
    }
}

impl Drop for IncomingFile {
    fn drop(&mut self) {
        // After `finish` renamed it, the temp name is gone and this is a no-op.
        let _ = std::fs::remove_file(&self.path);
    }
}
