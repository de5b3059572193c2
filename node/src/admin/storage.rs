//! Media archives: count the stored objects, export them into `DATA_DIR/exports/*.tar.gz` (one object at a
//! time streamed from the media store, local or S3, into a gzip'd tar written on a blocking thread; entries
//! are `media/{sessionId}/{sha256}`, or `media/{sha256}` for keys written before per-session keys), delete archives
//! after `STORAGE_EXPORT_TTL_MS`, and import an archive from inside `DATA_DIR` only: no `..`, no symbolic
//! link anywhere on the path, no entry that would land outside the media directory, and the whole archive
//! read once before anything is stored, so a corrupt one changes nothing.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use wagate_proto::dto::admin::{StorageExportResult, StorageFileCount, StorageImportResult};

use super::{AdminError, AdminResult, DataAdmin};
use crate::media::{MediaObject, MediaStore, MediaStream};

const ARCHIVE_SUFFIX: &str = ".tar.gz";
/// Archive entries are `media/<key>`.
const ENTRY_DIR: &str = "media";

impl DataAdmin {
    fn exports_dir(&self) -> PathBuf {
        self.data_dir.join("exports")
    }

    pub(crate) async fn storage_count(&self) -> AdminResult<StorageFileCount> {
        let objects = self.media.list(None).await?;
        let size_bytes: u64 = objects.iter().map(|o| o.size).sum();
        Ok(StorageFileCount {
            storage_type: self.media.storage_type().as_str().to_string(),
            count: objects.len() as u64,
            size_bytes,
            size_mb: (size_bytes as f64 / (1024.0 * 1024.0) * 100.0).round() / 100.0,
        })
    }

    /// Writes every media object into a new archive; answers where it is, relative to the working
    /// directory when it lies under it. The archive is deleted after the TTL.
    pub(crate) async fn storage_export(&self) -> AdminResult<(StorageExportResult, u64)> {
        let dir = self.exports_dir();
        tokio::fs::create_dir_all(&dir).await.map_err(internal)?;
        self.sweep_expired().await;
        let objects = self.media.list(None).await?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let name = format!("storage-{stamp}-{suffix}{ARCHIVE_SUFFIX}");
        let path = dir.join(&name);
        let partial = dir.join(format!(".{name}.partial"));
        let count = objects.len() as u64;
        let source = self.media.clone();
        let handle = tokio::runtime::Handle::current();
        let target = partial.clone();
        let written =
            tokio::task::spawn_blocking(move || write_archive(&target, &objects, &source, &handle))
                .await
                .map_err(internal)?;
        if let Err(err) = written {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(err);
        }
        tokio::fs::rename(&partial, &path).await.map_err(internal)?;
        let ttl = Duration::from_millis(self.export_ttl_ms);
        let expiring = path.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let _ = tokio::fs::remove_file(&expiring).await;
        });
        Ok((
            StorageExportResult {
                message: format!("Exported {count} media file(s)"),
                download: display_path(&path),
            },
            count,
        ))
    }

    /// Deletes archives older than the TTL (the per-archive timers do not survive a restart).
    async fn sweep_expired(&self) {
        let Ok(mut dir) = tokio::fs::read_dir(self.exports_dir()).await else {
            return;
        };
        while let Ok(Some(entry)) = dir.next_entry().await {
            let path = entry.path();
            if path.to_string_lossy().ends_with(ARCHIVE_SUFFIX) && self.is_expired(&path).await {
                let _ = tokio::fs::remove_file(&path).await;
            }
        }
    }

    async fn is_expired(&self, path: &Path) -> bool {
        let Ok(meta) = tokio::fs::metadata(path).await else {
            return false;
        };
        let age = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .unwrap_or_default();
        age > Duration::from_millis(self.export_ttl_ms)
    }

    /// Whether `path` names an export of ours (`storage-<UTC stamp>-...`) made longer than the TTL ago.
    fn expired_by_name(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Some(stamp) = name
            .strip_prefix("storage-")
            .and_then(|rest| rest.get(..15))
        else {
            return false;
        };
        let Ok(made) = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S") else {
            return false;
        };
        let age = chrono::Utc::now().naive_utc() - made;
        age.to_std()
            .is_ok_and(|age| age > Duration::from_millis(self.export_ttl_ms))
    }

    pub(crate) async fn storage_import(&self, file_path: &str) -> AdminResult<StorageImportResult> {
        let path = self.archive_path(file_path)?;
        let exports = absolute(&self.exports_dir());
        let Ok(meta) = tokio::fs::metadata(&path).await else {
            // A sweep may have deleted it already: an export's name says when it was made.
            if path.starts_with(&exports) && self.expired_by_name(&path) {
                return Err(expired(file_path));
            }
            return Err(AdminError::BadRequest(format!(
                "Archive not found: {file_path}"
            )));
        };
        if !meta.is_file() {
            return Err(AdminError::BadRequest(format!(
                "Archive is not a file: {file_path}"
            )));
        }
        if path.starts_with(&exports) && self.is_expired(&path).await {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(expired(file_path));
        }
        let scan_path = path.clone();
        let keys = tokio::task::spawn_blocking(move || scan_archive(&scan_path))
            .await
            .map_err(internal)??;
        let media = self.media.clone();
        let handle = tokio::runtime::Handle::current();
        let count =
            tokio::task::spawn_blocking(move || import_archive(&path, &keys, &media, &handle))
                .await
                .map_err(internal)??;
        Ok(StorageImportResult {
            imported: true,
            count,
            storage_type: self.media.storage_type().as_str().to_string(),
        })
    }

    /// `file_path` resolved, when it lies inside `DATA_DIR` with no `..` and no symbolic link on the way.
    fn archive_path(&self, file_path: &str) -> AdminResult<PathBuf> {
        let outside = || AdminError::BadRequest("filePath must lie inside data/".into());
        if file_path.trim().is_empty() {
            return Err(AdminError::BadRequest("filePath is required".into()));
        }
        let given = Path::new(file_path);
        if given
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return Err(outside());
        }
        let path = absolute(given);
        let root = absolute(&self.data_dir);
        let inside = path.strip_prefix(&root).map_err(|_| outside())?;
        if inside.as_os_str().is_empty() {
            return Err(outside());
        }
        let mut walked = root.clone();
        for part in inside.components() {
            walked.push(part);
            if std::fs::symlink_metadata(&walked).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(AdminError::BadRequest(
                    "filePath must not go through a symbolic link".into(),
                ));
            }
        }
        Ok(path)
    }
}

/// The path made absolute against the working directory and cleaned of `.` components.
fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// The path relative to the working directory when it lies under it (the spec's `data/exports/...`).
fn display_path(path: &Path) -> String {
    let abs = absolute(path);
    let cwd = std::env::current_dir().unwrap_or_default();
    abs.strip_prefix(&cwd)
        .map(Path::to_path_buf)
        .unwrap_or(abs)
        .display()
        .to_string()
}

fn internal(err: impl std::fmt::Display) -> AdminError {
    AdminError::Internal(err.to_string())
}

/// Reads a streamed object from a blocking thread (the tar writer is synchronous), one chunk at a time.
struct BlockingReader<'a> {
    body: MediaStream,
    pending: bytes::Bytes,
    handle: &'a tokio::runtime::Handle,
}

impl Read for BlockingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use futures::StreamExt;
        while self.pending.is_empty() {
            match self.handle.block_on(self.body.body.next()) {
                Some(Ok(chunk)) => self.pending = chunk,
                Some(Err(err)) => return Err(std::io::Error::other(err)),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

fn write_archive(
    target: &Path,
    objects: &[MediaObject],
    source: &MediaStore,
    handle: &tokio::runtime::Handle,
) -> AdminResult<()> {
    let file = std::fs::File::create(target).map_err(internal)?;
    let gz =
        flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for object in objects {
        let Some(body) = handle.block_on(source.stream(&object.key))? else {
            continue; // removed since it was listed
        };
        let mut header = tar::Header::new_gnu();
        // The size read now, not the listed one: the tar header must match the bytes that follow.
        header.set_size(body.size);
        header.set_mode(0o644);
        header.set_mtime(now);
        header.set_entry_type(tar::EntryType::Regular);
        let reader = BlockingReader {
            body,
            pending: bytes::Bytes::new(),
            handle,
        };
        builder
            .append_data(&mut header, format!("{ENTRY_DIR}/{}", object.key), reader)
            .map_err(|err| archive_error(err, "write"))?;
    }
    let finish = || -> std::io::Result<()> {
        let gz = builder.into_inner()?;
        let mut writer = gz.finish()?;
        std::io::Write::flush(&mut writer)?;
        writer.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    finish().map_err(internal)
}

/// A failure while writing the archive: the media backend failing mid-stream is a 503, anything else 500.
fn archive_error(err: std::io::Error, what: &str) -> AdminError {
    let unavailable = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<crate::media::MediaError>())
        .is_some_and(|m| matches!(m, crate::media::MediaError::Unavailable(_)));
    if unavailable {
        AdminError::Unavailable(format!("Media storage failed during archive {what}: {err}"))
    } else {
        internal(err)
    }
}

/// What an entry of an archive is: a media object to store, something to skip, or a refusal.
fn classify(entry_path: &Path, kind: tar::EntryType) -> Result<Option<String>, AdminError> {
    let escapes = entry_path.components().any(|c| {
        matches!(
            c,
            Component::ParentDir | Component::RootDir | Component::Prefix(_)
        )
    });
    if escapes || kind.is_symlink() || kind.is_hard_link() {
        return Err(AdminError::BadRequest(format!(
            "Archive entry '{}' would escape the media directory",
            entry_path.display()
        )));
    }
    if !kind.is_file() {
        return Ok(None);
    }
    let parts: Vec<String> = entry_path
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let key = match parts.as_slice() {
        [dir, rest @ ..] if dir == ENTRY_DIR => rest.join("/"),
        _ => parts.join("/"),
    };
    if !crate::media::is_media_key(&key) {
        return Err(AdminError::BadRequest(format!(
            "Archive entry '{}' is not a media file",
            entry_path.display()
        )));
    }
    Ok(Some(key))
}

fn open_archive(
    path: &Path,
) -> std::io::Result<tar::Archive<flate2::read::GzDecoder<std::fs::File>>> {
    Ok(tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(path)?,
    )))
}

/// Reads the whole archive once: every entry must be readable and stay inside the media directory.
fn scan_archive(path: &Path) -> AdminResult<Vec<Option<String>>> {
    let corrupt = |err: std::io::Error| {
        AdminError::BadRequest(format!("Archive is corrupt or not a tar.gz: {err}"))
    };
    let mut archive = open_archive(path).map_err(corrupt)?;
    let mut keys = Vec::new();
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let entry_path = entry.path().map_err(corrupt)?.into_owned();
        keys.push(classify(&entry_path, entry.header().entry_type())?);
        std::io::copy(&mut entry, &mut std::io::sink()).map_err(corrupt)?;
    }
    Ok(keys)
}

/// Stores every media entry through the media store, one at a time, each streamed in chunks from the
/// archive (nothing is held whole). Returns how many were stored.
fn import_archive(
    path: &Path,
    keys: &[Option<String>],
    media: &MediaStore,
    handle: &tokio::runtime::Handle,
) -> AdminResult<u64> {
    let mut archive = open_archive(path).map_err(internal)?;
    let mut count = 0u64;
    for (entry, key) in archive.entries().map_err(internal)?.zip(keys) {
        let mut entry = entry.map_err(internal)?;
        let Some(key) = key else {
            continue;
        };
        let stored = store_entry(media, handle, key, &mut entry)?;
        if &stored != key {
            tracing::warn!(entry = %key, stored = %stored, "archive entry's content does not match its name; stored under its content address");
        }
        count += 1;
    }
    Ok(count)
}

/// Hands the entry's bytes to the media store in chunks through a small channel (the tar reader is
/// synchronous, the store is not); answers the key it was stored under.
fn store_entry(
    media: &MediaStore,
    handle: &tokio::runtime::Handle,
    key: &str,
    entry: &mut impl Read,
) -> AdminResult<String> {
    const CHUNK: usize = 64 * 1024;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
    let body = futures::stream::unfold(receiver, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let store = media.clone();
    let target = key.to_string();
    let task = handle.spawn(async move { store.import_object(&target, Box::pin(body)).await });
    let mut buf = vec![0u8; CHUNK];
    loop {
        match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if sender
                    .blocking_send(Ok(bytes::Bytes::copy_from_slice(&buf[..n])))
                    .is_err()
                {
                    break; // the store gave up; its error is below
                }
            }
            Err(err) => {
                let _ = sender.blocking_send(Err(err));
                break;
            }
        }
    }
    drop(sender);
    let stored = handle.block_on(task).map_err(internal)??;
    Ok(stored.key)
}

fn expired(file_path: &str) -> AdminError {
    AdminError::BadRequest(format!(
        "Archive has expired (older than STORAGE_EXPORT_TTL_MS) and was deleted: {file_path}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_outside_the_media_directory_are_refused() {
        let key = "a".repeat(64);
        assert_eq!(
            classify(Path::new(&format!("media/{key}")), tar::EntryType::Regular).unwrap(),
            Some(key.clone())
        );
        let scoped = format!("s-1/{key}");
        assert_eq!(
            classify(
                Path::new(&format!("media/{scoped}")),
                tar::EntryType::Regular
            )
            .unwrap(),
            Some(scoped)
        );
        assert!(classify(Path::new("media/a/b/c"), tar::EntryType::Regular).is_err());
        assert!(
            classify(
                Path::new(&format!("media/.x/{key}")),
                tar::EntryType::Regular
            )
            .is_err()
        );
        assert!(classify(Path::new("media/../../etc/passwd"), tar::EntryType::Regular).is_err());
        assert!(classify(Path::new("/etc/passwd"), tar::EntryType::Regular).is_err());
        assert!(classify(Path::new(&format!("media/{key}")), tar::EntryType::Symlink).is_err());
        assert_eq!(
            classify(Path::new("media"), tar::EntryType::Directory).unwrap(),
            None
        );
    }
}
