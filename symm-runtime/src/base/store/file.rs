//! A [`Store`] in a directory of a shared filesystem.

use super::{check_key, decode_counter, time_left, Store, StoreError};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Keys up to this many bytes are hex-encoded into the file name; longer
/// ones are hashed, keeping names under the usual 255-byte limit.
const MAX_HEX_KEY: usize = 100;
const FIRST_POLL: Duration = Duration::from_millis(1);
const MAX_POLL: Duration = Duration::from_millis(50);
const FIRST_LOCK_RETRY: Duration = Duration::from_micros(50);
const MAX_LOCK_RETRY: Duration = Duration::from_millis(5);
/// A lock is held for one read-modify-write, microseconds; one held this
/// long was left by a process that died holding it.
const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// A [`Store`] kept as files in a directory every rank can reach, for ranks
/// that share a filesystem but no network port.
///
/// Each key is one file, named from the hex encoding of the key (a SHA-256
/// of it for keys over 100 bytes), so any key is a safe file name: `/`,
/// `..` and unicode cannot escape the directory, and names differ only in
/// lowercase hex, so case-insensitive filesystems are fine. Values are
/// written to a temporary file in the same directory and renamed over the
/// key's file, so readers see the old or the new value, never a torn one.
///
/// `set` and `add` take a per-key lock file, created with `create_new`
/// (`O_EXCL`), around their update, so `add` is atomic across processes.
/// (`std::fs::File::lock` would do, but needs Rust 1.89 and the workspace
/// supports 1.87.) A process killed while holding a lock, a window of
/// microseconds, leaves the lock file behind; later updates of that key
/// then fail after 30 s with an error naming the file to delete.
///
/// Counters are decimal text, as in [`InProcessStore`](super::InProcessStore).
/// Nothing is fsynced: the store is for rendezvous, not durability.
///
/// # One directory per job
///
/// Use a **fresh directory for every job**, and never reuse one: the keys of
/// an earlier job stay behind, and a new job that finds them is confused by
/// them. Its ranks count their joins on per-rank counters, so after an
/// earlier job in which not every rank joined as often (one that failed
/// part-way, say), the new job's ranks land in different generations and
/// wait for each other until they time out. Remove the directory when the
/// job is over.
///
/// # Access
///
/// Anyone who can write the directory can plant or change keys, so the store
/// insists that only its user can: missing directories are created with mode
/// `0o700`, and [`FileStore::new`] refuses a directory that is a symbolic
/// link, is not owned by the current user, or is writable by group or others
/// (`chmod go-w` fixes that, if the directory is otherwise fine). Files are
/// created readable by their owner only, so all ranks must run as the same
/// user.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// A store in `dir`, creating it (and missing parents) with mode `0o700`
    /// if needed. Every rank must name the same directory, and each job a
    /// fresh one (see [One directory per job](FileStore#one-directory-per-job)).
    ///
    /// Fails with [`StoreError::Unavailable`] if `dir` cannot be created, or
    /// if it is a symbolic link, not a directory, not owned by the current
    /// user, or writable by group or others (see [Access](FileStore#access)).
    pub fn new(dir: impl Into<PathBuf>) -> Result<FileStore, StoreError> {
        // Without a trailing `/`, which would make `symlink_metadata` follow
        // a link.
        let dir: PathBuf = dir.into().components().collect();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                StoreError::Unavailable(format!(
                    "could not create the store directory {}: {e}",
                    dir.display()
                ))
            })?;
        check_dir(&dir)?;
        Ok(FileStore { dir })
    }

    /// The directory holding the store's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        let mut name = String::with_capacity(2 + 2 * MAX_HEX_KEY.max(32));
        let bytes: &[u8] = if key.len() <= MAX_HEX_KEY {
            name.push_str("k-");
            key.as_bytes()
        } else {
            name.push_str("h-");
            &Sha256::digest(key.as_bytes())[..]
        };
        for b in bytes {
            let _ = write!(name, "{b:02x}");
        }
        self.dir.join(name)
    }

    fn io_error(&self, what: &str, path: &Path, e: io::Error) -> StoreError {
        StoreError::Unavailable(format!("{what} {}: {e}", path.display()))
    }

    /// Writes `value` to `path` atomically: temp file, then rename.
    fn write_atomic(&self, path: &Path, value: &[u8]) -> Result<(), StoreError> {
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)
            .map_err(|e| self.io_error("could not create a temporary file in", &self.dir, e))?;
        tmp.write_all(value)
            .map_err(|e| self.io_error("could not write", tmp.path(), e))?;
        tmp.persist(path)
            .map_err(|e| self.io_error("could not rename a temporary file to", path, e.error))?;
        Ok(())
    }

    /// Takes the lock file of the key stored at `path`.
    fn lock(&self, path: &Path) -> Result<LockGuard, StoreError> {
        let mut lock = path.as_os_str().to_owned();
        lock.push(".lock");
        let lock = PathBuf::from(lock);
        let start = Instant::now();
        let mut retry = FIRST_LOCK_RETRY;
        loop {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&lock)
            {
                Ok(_) => return Ok(LockGuard { path: lock }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(self.io_error("could not create the lock file", &lock, e)),
            }
            if start.elapsed() >= LOCK_TIMEOUT {
                return Err(StoreError::Unavailable(format!(
                    "could not take the lock {} within {LOCK_TIMEOUT:?}; if no process \
                     is using the store, a crashed one left it: delete it",
                    lock.display()
                )));
            }
            std::thread::sleep(retry);
            retry = (retry * 2).min(MAX_LOCK_RETRY);
        }
    }
}

/// Checks that only the current user can change the store directory `dir`.
fn check_dir(dir: &Path) -> Result<(), StoreError> {
    let refuse = |what: String| {
        StoreError::Unavailable(format!(
            "refusing the store directory {}: {what}",
            dir.display()
        ))
    };
    let meta =
        fs::symlink_metadata(dir).map_err(|e| refuse(format!("could not inspect it: {e}")))?;
    if meta.file_type().is_symlink() {
        return Err(refuse(
            "it is a symbolic link; name the directory itself".into(),
        ));
    }
    if !meta.is_dir() {
        return Err(refuse("it is not a directory".into()));
    }
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "it is owned by uid {}, not by this process's uid {me}, so another \
             user could change its keys",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "its mode {mode:o} lets group or others write it, and so plant keys \
             (chmod go-w it, or use a fresh directory)"
        )));
    }
    Ok(())
}

/// Removes the lock file when the update is done (or unwinds).
struct LockGuard {
    path: PathBuf,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path) {
            tracing::warn!("could not remove store lock {}: {e}", self.path.display());
        }
    }
}

impl Store for FileStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        let path = self.path(key);
        // Locked so a concurrent `add` cannot overwrite this value with one
        // computed from the previous.
        let _lock = self.lock(&path)?;
        self.write_atomic(&path, value)
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        let path = self.path(key);
        match fs::read(&path) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error("could not read", &path, e)),
        }
    }

    fn wait(&self, keys: &[String], timeout: Duration) -> Result<(), StoreError> {
        for k in keys {
            check_key(k)?;
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut pending: Vec<(&String, PathBuf)> = keys.iter().map(|k| (k, self.path(k))).collect();
        let mut poll = FIRST_POLL;
        loop {
            let mut err = None;
            pending.retain(|(_, p)| match p.try_exists() {
                Ok(found) => !found,
                Err(e) => {
                    err.get_or_insert_with(|| self.io_error("could not look for", p, e));
                    true
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            if pending.is_empty() {
                return Ok(());
            }
            let left = time_left(deadline);
            if left.is_zero() {
                return Err(StoreError::Timeout {
                    timeout,
                    missing: pending.into_iter().map(|(k, _)| k.clone()).collect(),
                });
            }
            std::thread::sleep(poll.min(left));
            poll = (poll * 2).min(MAX_POLL);
        }
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        check_key(key)?;
        let path = self.path(key);
        let _lock = self.lock(&path)?;
        let current = match fs::read(&path) {
            Ok(v) => decode_counter(&v).ok_or_else(|| StoreError::NotACounter {
                key: key.to_owned(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(self.io_error("could not read", &path, e)),
        };
        let next = current.wrapping_add(delta);
        self.write_atomic(&path, next.to_string().as_bytes())?;
        Ok(next)
    }
}
