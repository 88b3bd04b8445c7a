//! Key-value stores through which ranks exchange rendezvous data.
//!
//! A [`Store`] is the only thing ranks must share before symmetric memory
//! exists. [`InProcessStore`] serves ranks that are threads of one process;
//! [`TcpStore`] (hosted by rank 0) and [`FileStore`] (a shared directory)
//! serve one process per GPU.

mod file;
mod tcp;
mod values;

pub use file::FileStore;
pub use tcp::{TcpStore, TcpStoreLimits};

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Errors from a [`Store`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Some keys did not appear in time.
    #[error("timed out after {timeout:?} waiting for keys {missing:?}")]
    Timeout {
        /// How long the caller waited.
        timeout: Duration,
        /// The keys still absent at the deadline.
        missing: Vec<String>,
    },
    /// The value under a key is not what `add` can count with.
    #[error("key {key:?} holds a value that is not a counter")]
    NotACounter {
        /// The key.
        key: String,
    },
    /// The store itself is broken (a poisoned lock, a lost connection).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A key, value or request exceeds a limit of the store, so it was
    /// refused before anything was written or sent.
    #[error("{what} is {len} bytes, more than the limit of {max} bytes")]
    TooLarge {
        /// What was too large ("key", "value", ...).
        what: &'static str,
        /// Its size in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The write would take the values a store holds past one of its
    /// memory limits ([`TcpStoreLimits`]), so nothing was written. Other
    /// clients are unaffected, and the connection stays usable.
    #[error(
        "the store's {limit} limit of {max} bytes would be exceeded (this write would make \
         it {would_be} bytes); nothing was written"
    )]
    OverLimit {
        /// Which limit: "per-connection value memory" or "total value memory".
        limit: &'static str,
        /// The limit, in bytes.
        max: usize,
        /// What the write would have made it, in bytes.
        would_be: usize,
    },
    /// The TCP store already serves as many connections as it may, and
    /// refused this one at once rather than let it wait.
    #[error(
        "store full ({connections} connections): the store at {addr} refused a new \
         connection; retry once some close, or raise TcpStoreLimits::max_connections \
         on the host"
    )]
    Full {
        /// The store's address.
        addr: std::net::SocketAddr,
        /// Its connection limit.
        connections: usize,
    },
}

/// The longest key, in bytes, that [`TcpStore`] and [`FileStore`] accept.
///
/// Rendezvous keys are short paths; the bound lets a server reject garbage
/// before allocating for it.
pub const MAX_KEY_LEN: usize = 4096;

/// Time until `deadline`, zero once it has passed; unbounded without one.
pub(crate) fn time_left(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::MAX, |d| {
        d.saturating_duration_since(Instant::now())
    })
}

/// Refuses keys longer than [`MAX_KEY_LEN`].
fn check_key(key: &str) -> Result<(), StoreError> {
    if key.len() > MAX_KEY_LEN {
        return Err(StoreError::TooLarge {
            what: "key",
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    Ok(())
}

/// A key-value store shared by every rank of a group.
///
/// Keys are written once per rendezvous and read by every rank, so the
/// operations are the few that rendezvous needs: set, get, wait and add.
pub trait Store: Send + Sync {
    /// Sets `key` to `value`, waking waiters.
    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;

    /// Returns the value under `key`, or `None` if it is absent. Never blocks.
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Blocks until every key in `keys` exists, or fails with
    /// [`StoreError::Timeout`] naming the keys still missing.
    fn wait(&self, keys: &[String], timeout: Duration) -> Result<(), StoreError>;

    /// Atomically adds `delta` to the counter under `key` (absent counts as
    /// zero) and returns the new value.
    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError>;

    /// Waits for `key`, then returns its value.
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, StoreError> {
        self.wait(&[key.to_owned()], timeout)?;
        self.try_get(key)?
            .ok_or_else(|| StoreError::Unavailable(format!("key {key:?} vanished")))
    }

    /// Leaves a last word with the store's host: should this process end
    /// while the returned [`LastWord`] is alive (killed, or aborted without
    /// unwinding), the host writes `value` under `key`, unless the key has
    /// a value already, and adds 1 to `counter`. Dropping the `LastWord`
    /// takes the word back. `None` where the store cannot (it has no host
    /// apart from this process: in-process, file, or the host itself).
    fn last_word(
        &self,
        key: &str,
        value: &[u8],
        counter: &str,
    ) -> Result<Option<LastWord>, StoreError> {
        let _ = (key, value, counter);
        Ok(None)
    }

    /// Whether this process serves the store to processes of other ranks
    /// (a [`TcpStore`] host): its rank says so at join, so that those
    /// ranks can name it should it vanish.
    fn serves_others(&self) -> bool {
        false
    }

    /// Whether only this process can reach the store (an
    /// [`InProcessStore`]): then every rank of a group on it shares this
    /// process's group state, and joining needs no exchange to find ranks
    /// of other processes. False (the default) makes joining a group on
    /// the store collective while [`CommOptions::check_calls`] is on
    /// ([`Comm::emulated`](crate::Comm::emulated)).
    ///
    /// [`CommOptions::check_calls`]: crate::CommOptions::check_calls
    fn in_process(&self) -> bool {
        false
    }
}

/// A last word left with a store's host ([`Store::last_word`]); dropping
/// it takes the word back. What the word is belongs to the store that made
/// it ([`TcpStore`]'s own connection), so the trait that returns it need
/// not know that store.
#[derive(Debug)]
pub struct LastWord(Box<dyn Word>);

/// What a store's last word does: says how the host ended, and (on drop)
/// takes the word back.
pub(crate) trait Word: std::fmt::Debug + Send + Sync {
    /// How the host ended, if it has. Never blocks.
    fn host_end(&self) -> Option<HostEnd>;
}

impl LastWord {
    /// The last word a store left as `word`.
    pub(crate) fn new(word: impl Word + 'static) -> LastWord {
        LastWord(Box::new(word))
    }

    /// How the host ended, if it has (the connection ended from its side).
    /// Never blocks.
    pub fn host_end(&self) -> Option<HostEnd> {
        self.0.host_end()
    }
}

/// How a store's host ended, as a [`LastWord`]'s connection tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEnd {
    /// It closed the store (said goodbye): its process exited in order.
    Left,
    /// The connection ended without a goodbye: its process died.
    Vanished,
}

/// A [`Store`] for ranks that are threads of one process.
#[derive(Debug, Default)]
pub struct InProcessStore {
    map: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
}

impl InProcessStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, HashMap<String, Vec<u8>>>, StoreError> {
        self.map.lock().map_err(|_| {
            StoreError::Unavailable("a rank panicked while holding the store lock".into())
        })
    }
}

impl Store for InProcessStore {
    fn in_process(&self) -> bool {
        true
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.lock()?.insert(key.to_owned(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock()?.get(key).cloned())
    }

    fn wait(&self, keys: &[String], timeout: Duration) -> Result<(), StoreError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut map = self.lock()?;
        loop {
            let missing: Vec<String> = keys
                .iter()
                .filter(|k| !map.contains_key(k.as_str()))
                .cloned()
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if d <= now => return Err(StoreError::Timeout { timeout, missing }),
                Some(d) => d - now,
                // A timeout too large to represent waits forever, in slices.
                None => Duration::from_secs(3600),
            };
            map = self
                .changed
                .wait_timeout(map, left)
                .map_err(|_| {
                    StoreError::Unavailable("a rank panicked while holding the store lock".into())
                })?
                .0;
        }
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        let mut map = self.lock()?;
        let current = match map.get(key) {
            None => 0,
            Some(v) => decode_counter(v).ok_or_else(|| StoreError::NotACounter {
                key: key.to_owned(),
            })?,
        };
        let next = current.wrapping_add(delta);
        map.insert(key.to_owned(), next.to_string().into_bytes());
        drop(map);
        self.changed.notify_all();
        Ok(next)
    }
}

/// Counters are stored as decimal text, as torch's stores do, so a human can
/// read them in a dump.
fn decode_counter(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn set_get_and_overwrite() {
        let s = InProcessStore::new();
        assert_eq!(s.try_get("a").unwrap(), None);
        s.set("a", b"1").unwrap();
        assert_eq!(s.try_get("a").unwrap().as_deref(), Some(&b"1"[..]));
        s.set("a", b"22").unwrap();
        assert_eq!(s.get("a", Duration::from_millis(1)).unwrap(), b"22");
    }

    #[test]
    fn wait_times_out_naming_missing_keys() {
        let s = InProcessStore::new();
        s.set("k0", b"x").unwrap();
        let t = Instant::now();
        let err = s
            .wait(
                &["k0".into(), "k1".into(), "k2".into()],
                Duration::from_millis(50),
            )
            .unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(
            err,
            StoreError::Timeout {
                timeout: Duration::from_millis(50),
                missing: vec!["k1".into(), "k2".into()]
            }
        );
    }

    #[test]
    fn wait_wakes_when_another_thread_sets() {
        let s = Arc::new(InProcessStore::new());
        let s2 = s.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s2.set("late", b"v").unwrap();
        });
        s.wait(&["late".into()], Duration::from_secs(10)).unwrap();
        h.join().unwrap();
    }

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let s = InProcessStore::new();
        s.set("k", b"").unwrap();
        s.wait(&["k".into()], Duration::MAX).unwrap();
    }

    #[test]
    fn add_counts_atomically_across_threads() {
        let s = Arc::new(InProcessStore::new());
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        s.add("c", 1).unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(s.add("c", 0).unwrap(), 800);
        assert_eq!(s.add("c", -801).unwrap(), -1);
        s.set("text", b"abc").unwrap();
        assert_eq!(
            s.add("text", 1).unwrap_err(),
            StoreError::NotACounter { key: "text".into() }
        );
    }
}
