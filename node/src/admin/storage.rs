//! Media archives: count the stored objects, export them into `DATA_DIR/exports/*.tar.gz` (one object at a
//! time from the `MediaObjects` interface into a gzip'd tar written on a blocking thread), delete archives
//! after `STORAGE_EXPORT_TTL_MS`, and import an archive from inside `DATA_DIR` only: no `..`, no symbolic
//! link anywhere on the path, no entry that would land outside the media directory, and the whole archive
//! read once before anything is stored, so a corrupt one changes nothing.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use wagate_proto::dto::admin::{StorageExportResult, StorageFileCount, StorageImportResult};

use super::{AdminError, AdminResult, DataAdmin};
use crate::media::{MediaObject, MediaObjects, ObjectReader};

const ARCHIVE_SUFFIX: &str = ".tar.gz";
/// Archive entries are `media/<key>`.
const ENTRY_DIR: &str = "media";

impl DataAdmin {
    fn exports_dir(&self) -> PathBuf {
        self.data_dir.join("exports")
    }

    pub(crate) async fn storage_count(&self) -> AdminResult<StorageFileCount> {
        let objects = self.objects.list().await.map_err(internal)?;
        let size_bytes: u64 = objects.iter().map(|o| o.size).sum();
        Ok(StorageFileCount {
            storage_type: self.objects.storage_type().to_string(),
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
        let objects = self.objects.list().await.map_err(internal)?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let name = format!("storage-{stamp}-{suffix}{ARCHIVE_SUFFIX}");
        let path = dir.join(&name);
        let partial = dir.join(format!(".{name}.partial"));
        let count = objects.len() as u64;
        let source = self.objects.clone();
        let handle = tokio::runtime::Handle::current();
        let target = partial.clone();
        let written = tokio::task::spawn_blocking(move || {
            write_archive(&target, &objects, source.as_ref(), &handle)
        })
        .await
        .map_err(internal)?;
        if let Err(err) = written {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(internal(err));
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

    pub(crate) async fn storage_import(&self, file_path: &str) -> AdminResult<StorageImportResult> {
        let path = self.archive_path(file_path)?;
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|_| AdminError::BadRequest(format!("Archive not found: {file_path}")))?;
        if !meta.is_file() {
            return Err(AdminError::BadRequest(format!(
                "Archive is not a file: {file_path}"
            )));
        }
        let exports = absolute(&self.exports_dir());
        if path.starts_with(&exports) && self.is_expired(&path).await {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(AdminError::BadRequest(format!(
                "Archive has expired (older than STORAGE_EXPORT_TTL_MS) and was deleted: {file_path}"
            )));
        }
        let scan_path = path.clone();
        let keys = tokio::task::spawn_blocking(move || scan_archive(&scan_path))
            .await
            .map_err(internal)??;
        let objects = self.objects.clone();
        let handle = tokio::runtime::Handle::current();
        let scratch = self.data_dir.clone();
        let count = tokio::task::spawn_blocking(move || {
            import_archive(&path, &keys, objects.as_ref(), &handle, &scratch)
        })
        .await
        .map_err(internal)??;
        Ok(StorageImportResult {
            imported: true,
            count,
            storage_type: self.objects.storage_type().to_string(),
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

/// Reads an async object from a blocking thread (the tar writer is synchronous).
struct BlockingReader<'a> {
    inner: ObjectReader,
    handle: &'a tokio::runtime::Handle,
}

impl Read for BlockingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use tokio::io::AsyncReadExt;
        self.handle.block_on(self.inner.read(buf))
    }
}

fn write_archive(
    target: &Path,
    objects: &[MediaObject],
    source: &dyn MediaObjects,
    handle: &tokio::runtime::Handle,
) -> std::io::Result<()> {
    let file = std::fs::File::create(target)?;
    let gz =
        flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for object in objects {
        let Some(reader) = handle
            .block_on(source.open(&object.key))
            .map_err(std::io::Error::other)?
        else {
            continue; // removed since it was listed
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(object.size);
        header.set_mode(0o644);
        header.set_mtime(now);
        header.set_entry_type(tar::EntryType::Regular);
        let reader = BlockingReader {
            inner: reader,
            handle,
        };
        builder.append_data(&mut header, format!("{ENTRY_DIR}/{}", object.key), reader)?;
    }
    let gz = builder.into_inner()?;
    let mut writer = gz.finish()?;
    std::io::Write::flush(&mut writer)?;
    writer.into_inner().map_err(|e| e.into_error())?.sync_all()
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
    let name = match parts.as_slice() {
        [dir, name] if dir == ENTRY_DIR => name,
        [name] => name,
        _ => {
            return Err(AdminError::BadRequest(format!(
                "Archive entry '{}' is not a media file",
                entry_path.display()
            )));
        }
    };
    let valid = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(AdminError::BadRequest(format!(
            "Archive entry '{}' is not a media file",
            entry_path.display()
        )));
    }
    Ok(Some(name.clone()))
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

fn import_archive(
    path: &Path,
    keys: &[Option<String>],
    objects: &dyn MediaObjects,
    handle: &tokio::runtime::Handle,
    scratch: &Path,
) -> AdminResult<u64> {
    let mut archive = open_archive(path).map_err(internal)?;
    let mut count = 0u64;
    for (entry, key) in archive.entries().map_err(internal)?.zip(keys) {
        let mut entry = entry.map_err(internal)?;
        let Some(key) = key else {
            continue;
        };
        // Each file goes through a scratch file so the object store reads it as a stream.
        let mut tmp = tempfile::NamedTempFile::new_in(scratch).map_err(internal)?;
        std::io::copy(&mut entry, tmp.as_file_mut()).map_err(internal)?;
        let file = tmp.reopen().map_err(internal)?;
        let stored = handle
            .block_on(objects.put_reader(Box::pin(tokio::fs::File::from_std(file))))
            .map_err(internal)?;
        if &stored.key != key {
            tracing::warn!(entry = %key, stored = %stored.key, "archive entry's content does not match its name; stored under its content address");
        }
        count += 1;
    }
    Ok(count)
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
        assert!(classify(Path::new("media/../../etc/passwd"), tar::EntryType::Regular).is_err());
        assert!(classify(Path::new("/etc/passwd"), tar::EntryType::Regular).is_err());
        assert!(classify(Path::new(&format!("media/{key}")), tar::EntryType::Symlink).is_err());
        assert_eq!(
            classify(Path::new("media"), tar::EntryType::Directory).unwrap(),
            None
        );
    }
}
