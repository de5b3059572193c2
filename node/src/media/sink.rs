//! `Sink`: writes a media file to a temporary name while hashing and counting it, refuses to grow past the
//! cap, and renames the finished file to its SHA-256 content address. A dropped sink removes its temp file.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::{MediaError, StoredMedia};

pub(super) struct Sink {
    dir: PathBuf,
    tmp: PathBuf,
    file: Option<tokio::fs::File>,
    hasher: Sha256,
    size: u64,
    max: u64,
}

impl Sink {
    pub(super) async fn create(dir: &Path, max: u64) -> Result<Sink, MediaError> {
        tokio::fs::create_dir_all(dir).await?;
        let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        let file = tokio::fs::File::create(&tmp).await?;
        Ok(Sink {
            dir: dir.to_path_buf(),
            tmp,
            file: Some(file),
            hasher: Sha256::new(),
            size: 0,
            max,
        })
    }

    pub(super) fn max(&self) -> u64 {
        self.max
    }

    pub(super) fn size(&self) -> u64 {
        self.size
    }

    pub(super) async fn write(&mut self, bytes: &[u8]) -> Result<(), MediaError> {
        self.size += bytes.len() as u64;
        if self.size > self.max {
            return Err(MediaError::TooLarge(self.max));
        }
        self.hasher.update(bytes);
        if let Some(file) = self.file.as_mut() {
            file.write_all(bytes).await?;
        }
        Ok(())
    }

    pub(super) async fn finish(
        mut self,
        content_type: Option<String>,
    ) -> Result<StoredMedia, MediaError> {
        if let Some(mut file) = self.file.take() {
            file.flush().await?;
        }
        let key = hex::encode(std::mem::take(&mut self.hasher).finalize());
        tokio::fs::rename(&self.tmp, self.dir.join(&key)).await?;
        Ok(StoredMedia {
            key,
            size: self.size,
            content_type,
        })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // After a successful rename the temp name is gone and this is a no-op.
        let _ = std::fs::remove_file(&self.tmp);
    }
}
