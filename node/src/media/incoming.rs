//! `IncomingFile`: a blocking, size-capped scratch file for engines whose download code writes
//! synchronously (the socket engine's library decrypts into a `Write + Seek` sink on a blocking
//! thread). The store streams a finished file into the backend (`MediaStore::adopt`); the scratch file
//! is removed when this value drops.

use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

use super::MediaError;

pub(crate) struct IncomingFile {
    path: PathBuf,
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

    #[cfg(test)]
    pub(super) fn path_for_tests(&self) -> PathBuf {
        self.path.clone()
    }

    /// A reader over what was written, from the start.
    pub(super) async fn reader(&self) -> std::io::Result<tokio::fs::File> {
        let mut file = self.file.try_clone()?;
        file.flush()?;
        file.seek(SeekFrom::Start(0))?;
        Ok(tokio::fs::File::from_std(file))
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
        let _ = std::fs::remove_file(&self.path);
    }
}
