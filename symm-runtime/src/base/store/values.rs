//! The TCP host's values: an [`InProcessStore`] whose writes are charged to
//! the connection that made them, under a per-connection and a total limit.

use super::{decode_counter, InProcessStore, Store, StoreError};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What a key costs beyond its key and value bytes: the maps' bookkeeping,
/// so that a flood of empty keys is not free.
const ENTRY_OVERHEAD: usize = 64;

/// Who made a write: a connection, by number, or the host itself (rank 0,
/// which no per-connection limit applies to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Writer {
    /// The host's own `set` or `add`.
    Host,
    /// The connection with this number.
    Conn(u64),
}

/// The store and what each key costs. Every write goes through here, under
/// the accounts' lock, so a charge and its write cannot be torn apart.
pub(super) struct Values {
    store: InProcessStore,
    accounts: Mutex<Accounts>,
    max_per_connection: usize,
    max_total: usize,
}

#[derive(Default)]
struct Accounts {
    /// Bytes charged for every key.
    total: usize,
    /// Bytes charged to each live connection (the keys it wrote last).
    by_conn: HashMap<u64, usize>,
    /// Each key's last writer and charge.
    keys: HashMap<String, (Writer, usize)>,
}

impl Accounts {
    /// Refuses a write by `writer` that replaces `key`'s charge with `charge`
    /// if it would break a limit; otherwise returns nothing and changes
    /// nothing.
    fn check(
        &self,
        values: &Values,
        writer: Writer,
        key: &str,
        charge: usize,
    ) -> Result<(), StoreError> {
        let old = self.keys.get(key).copied();
        let old_charge = old.map_or(0, |(_, c)| c);
        let total = self.total - old_charge + charge;
        if total > values.max_total && charge > old_charge {
            return Err(StoreError::OverLimit {
                limit: "total value memory",
                max: values.max_total,
                would_be: total,
            });
        }
        if let Writer::Conn(id) = writer {
            let mine = self.by_conn.get(&id).copied().unwrap_or(0);
            let released = match old {
                Some((w, c)) if w == writer => c,
                _ => 0,
            };
            let would_be = mine - released + charge;
            if would_be > values.max_per_connection && charge > released {
                return Err(StoreError::OverLimit {
                    limit: "per-connection value memory",
                    max: values.max_per_connection,
                    would_be,
                });
            }
        }
        Ok(())
    }

    /// Records that `writer` wrote `key`, now costing `charge`.
    fn record(&mut self, writer: Writer, key: &str, charge: usize) {
        let old = self.keys.insert(key.to_owned(), (writer, charge));
        if let Some((w, c)) = old {
            self.total -= c;
            if let Writer::Conn(id) = w {
                // A connection that has ended keeps no account.
                if let Some(n) = self.by_conn.get_mut(&id) {
                    *n -= c;
                }
            }
        }
        self.total += charge;
        if let Writer::Conn(id) = writer {
            *self.by_conn.entry(id).or_insert(0) += charge;
        }
    }
}

/// What `key` with a value of `len` bytes costs.
fn charge(key: &str, len: usize) -> usize {
    key.len() + len + ENTRY_OVERHEAD
}

impl Values {
    /// An empty store with these limits, in bytes.
    pub(super) fn new(max_per_connection: usize, max_total: usize) -> Self {
        Values {
            store: InProcessStore::new(),
            accounts: Mutex::new(Accounts::default()),
            max_per_connection,
            max_total,
        }
    }

    fn accounts(&self) -> MutexGuard<'_, Accounts> {
        // Nothing panics while holding the lock; a poisoned one is intact.
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets `key` for `writer`, unless that breaks a limit.
    pub(super) fn set(&self, writer: Writer, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let mut accounts = self.accounts();
        let charge = charge(key, value.len());
        accounts.check(self, writer, key, charge)?;
        self.store.set(key, value)?;
        accounts.record(writer, key, charge);
        Ok(())
    }

    /// Adds to the counter `key` for `writer`, unless its longer text
    /// breaks a limit.
    pub(super) fn add(&self, writer: Writer, key: &str, delta: i64) -> Result<i64, StoreError> {
        let mut accounts = self.accounts();
        // Every write holds the accounts' lock: the value read is the one
        // `add` will change, so the new text's length is known beforehand.
        let next = match self.store.try_get(key)? {
            None => delta,
            Some(v) => match decode_counter(&v) {
                Some(n) => n.wrapping_add(delta),
                None => {
                    return Err(StoreError::NotACounter {
                        key: key.to_owned(),
                    })
                }
            },
        };
        let charge = charge(key, next.to_string().len());
        accounts.check(self, writer, key, charge)?;
        let got = self.store.add(key, delta)?;
        accounts.record(writer, key, charge);
        Ok(got)
    }

    /// Forgets connection `id`'s account when it ends; what it wrote stays
    /// (and counts toward the total).
    pub(super) fn release(&self, id: u64) {
        self.accounts().by_conn.remove(&id);
    }

    /// The value under `key`, if any.
    pub(super) fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.try_get(key)
    }

    /// Waits for `keys`, as [`Store::wait`].
    pub(super) fn wait(&self, keys: &[String], timeout: Duration) -> Result<(), StoreError> {
        self.store.wait(keys, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_charged_to_their_last_writer() {
        let v = Values::new(1000, 2000);
        let (a, b) = (Writer::Conn(1), Writer::Conn(2));
        // 1 + 500 + 64 = 565 bytes for a.
        v.set(a, "k", &[0; 500]).unwrap();
        // A second key would make a's account 1130.
        let e = v.set(a, "j", &[0; 500]).unwrap_err();
        assert_eq!(
            e,
            StoreError::OverLimit {
                limit: "per-connection value memory",
                max: 1000,
                would_be: 1130
            }
        );
        // Overwriting its own key replaces the charge.
        v.set(a, "k", &[1; 900]).unwrap();
        // b takes k over: a's account is freed, b's charged.
        v.set(b, "k", &[2; 10]).unwrap();
        v.set(a, "j", &[0; 900]).unwrap();
        // The host has no per-connection limit, only the total one.
        v.set(Writer::Host, "h", &[0; 800]).unwrap();
        let e = v.set(b, "x", &[0; 100]).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::OverLimit {
                    limit: "total value memory",
                    max: 2000,
                    ..
                }
            ),
            "{e:?}"
        );
        // Shrinking always fits; nothing refused was written.
        v.set(Writer::Host, "h", b"").unwrap();
        assert_eq!(v.try_get("x").unwrap(), None);
        v.set(b, "x", &[0; 100]).unwrap();
        // An ended connection's keys still count toward the total, but its
        // account is gone: a new connection starts from nothing.
        v.release(1);
        let e = v.set(Writer::Conn(3), "y", &[0; 1000]).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::OverLimit {
                    limit: "total value memory",
                    ..
                }
            ),
            "{e:?}"
        );
        v.set(Writer::Conn(3), "y", &[0; 300]).unwrap();
    }

    #[test]
    fn counters_are_charged_by_their_text() {
        let v = Values::new(1 << 20, 100);
        let w = Writer::Conn(7);
        // "c" + "9" + 64 = 66; "c" + "10" + 64 = 67: fits, both times.
        assert_eq!(v.add(w, "c", 9).unwrap(), 9);
        assert_eq!(v.add(w, "c", 1).unwrap(), 10);
        // A second counter would be 67 + 67.
        assert!(matches!(
            v.add(w, "d", 10),
            Err(StoreError::OverLimit { would_be: 134, .. })
        ));
        v.set(w, "t", b"x").unwrap_err();
        v.set(Writer::Host, "c", b"text").unwrap();
        assert_eq!(
            v.add(w, "c", 1).unwrap_err(),
            StoreError::NotACounter { key: "c".into() }
        );
    }
}
