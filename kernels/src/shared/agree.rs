//! Cross-rank agreement on a call: on the first call of a key, every rank
//! publishes its key (hash and words) and any local problem with its
//! arguments through the group's store, and reads every other rank's, so
//! a mismatch, or a bad argument on one rank, is the same clear error on
//! every rank instead of a kernel waiting for data that never comes.
//! Later calls of a key the group agreed on cost a hash lookup.

use std::collections::HashSet;
use std::sync::Mutex;

use symm::{Comm, Error, ErrorKind, GroupName, Result};

use super::key::CallKey;

/// Keys this rank's group agreed on, and how many exchanges it made (the
/// store keys' sequence: ranks make the same calls in the same order, so
/// the n-th exchange of each rank meets the n-th of the others).
#[derive(Default)]
struct Agreed {
    keys: Mutex<(HashSet<u64>, u64)>,
}

/// Keys a rank remembers as agreed; past this many it forgets them all
/// (the all-reduce's own set of 1024 identities falls back on this one,
/// so it must be much larger than that).
const MAX_AGREED: usize = 1 << 16;

/// A rank's local problem with its arguments: what kind of failure it is
/// ([`ErrorKind`]: an invalid argument, unless the check said otherwise)
/// and its text. Every rank reports the first problem's kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) kind: ErrorKind,
    pub(crate) text: String,
}

impl From<String> for Problem {
    fn from(text: String) -> Problem {
        Problem {
            kind: ErrorKind::InvalidArgument,
            text,
        }
    }
}

impl From<&str> for Problem {
    fn from(text: &str) -> Problem {
        text.to_string().into()
    }
}

impl Problem {
    /// A limit of symm's that the call passes (the 2^32 elements its
    /// kernels index, say), rather than a mistake in its arguments.
    pub(crate) fn capacity(text: String) -> Problem {
        Problem {
            kind: ErrorKind::Capacity,
            text,
        }
    }

    /// The problem with a call that needs `count` elements (`None`: more
    /// than `usize` holds) where fewer fit: a capacity problem past the
    /// 2^32 - 1 its kernels index, whatever the memory, else an invalid
    /// argument.
    pub(crate) fn too_many(count: Option<usize>, text: String) -> Problem {
        match count {
            Some(n) if n <= u32::MAX as usize => text.into(),
            _ => Problem::capacity(text),
        }
    }
}

impl From<&Error> for Problem {
    /// The error's kind and text: an argument check's message alone (the
    /// verdict names the rank), any other error whole.
    fn from(e: &Error) -> Problem {
        Problem {
            kind: e.kind(),
            text: e.message().map_or_else(|| e.to_string(), str::to_string),
        }
    }
}

/// What one rank says of a call: its key's hash and words, and its local
/// problem if any (its kind's code, then its text).
fn encode(hash: u64, words: &str, problem: Option<&Problem>) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + words.len());
    v.extend_from_slice(&hash.to_le_bytes());
    v.extend_from_slice(&(words.len() as u64).to_le_bytes());
    v.extend_from_slice(words.as_bytes());
    if let Some(p) = problem {
        v.push(p.kind.code());
        v.extend_from_slice(p.text.as_bytes());
    }
    v
}

/// A rank's entry: (hash, words, problem), or `None` if unreadable.
fn decode(raw: &[u8]) -> Option<(u64, String, Option<Problem>)> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            raw.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let hash = word(0)?;
    let len = usize::try_from(word(1)?).ok()?;
    let words = raw.get(16..16usize.checked_add(len)?)?;
    let problem = raw[16 + len..].split_first().map(|(&code, text)| Problem {
        kind: ErrorKind::from_code(code).unwrap_or(ErrorKind::InvalidArgument),
        text: String::from_utf8_lossy(text).into_owned(),
    });
    Some((hash, String::from_utf8_lossy(words).into_owned(), problem))
}

/// Checks that every rank of `comm`'s group makes the call `key`: the keys
/// must be equal on every rank, and no rank may have a `problem` with its
/// own arguments. Returns at once for a key the group agreed on before
/// (with this rank's problem, if any: the kernels' own digest check
/// catches what differs later). Otherwise it waits (at most the group's
/// timeout) for every rank's entry; every rank then returns the same
/// verdict. Returns the key's hash ([`CallKey::hash64`]), for the
/// call's digest, so that a call hashes its key once.
pub(crate) fn agree<K: CallKey>(comm: &Comm, key: &K, problem: Option<Problem>) -> Result<u64> {
    match agree_or_alone(comm, key, problem)? {
        Agreement::Agreed(hash) => Ok(hash),
        Agreement::Alone(e) => Err(e),
    }
}

/// How [`agree_or_alone`] ended, short of an error every rank shares.
pub(crate) enum Agreement {
    /// Every rank makes the call, with no problem: the key's hash.
    Agreed(u64),
    /// A key agreed on before, and a problem of this rank's alone: its
    /// peers, which know nothing of it, go on into the call.
    Alone(Error),
}

/// [`agree`], telling a problem every rank returns alike (the `Err`, from
/// an exchange) from one this rank alone has on a key agreed before
/// ([`Agreement::Alone`]), so that a caller whose peers would otherwise
/// wait for it can still make its part of the call fail on every rank.
pub(crate) fn agree_or_alone<K: CallKey>(
    comm: &Comm,
    key: &K,
    problem: Option<Problem>,
) -> Result<Agreement> {
    let what = key.name();
    let hash = key.hash64();
    let agreed = comm.extension(|_: &Agreed| true, |_| Ok(Agreed::default()))?;
    let seq = {
        let mut s = agreed.keys.lock().unwrap_or_else(|p| p.into_inner());
        if s.0.contains(&hash) {
            // The peers, with nothing to report, run the call without an
            // exchange; this rank's problem stays its own (and its peers'
            // kernels time out waiting for it, naming it). Joining an
            // exchange here would leave this rank's sequence one ahead of
            // theirs for good.
            return Ok(match problem {
                None => Agreement::Agreed(hash),
                Some(p) => Agreement::Alone(comm.error(p.kind, format!("{what}: {}", p.text))),
            });
        }
        s.1 += 1;
        s.1
    };
    let (rank, world) = (comm.rank(), comm.world_size());
    let store = comm.store();
    let store_key = |r: usize| comm.store_key(&format!("symm_kernels/agree/{seq}/{r}"));
    let store_err = |source| comm.store_error(source);
    store
        .set(
            &store_key(rank),
            &encode(hash, &key.to_string(), problem.as_ref()),
        )
        .map_err(store_err)?;
    let keys: Vec<String> = (0..world).map(store_key).collect();
    let timeout = comm.options().timeout;
    store.wait(&keys, timeout).map_err(|e| match e {
        symm::StoreError::Timeout { missing, .. } => {
            let ranks: Vec<usize> = (0..world)
                .filter(|&r| missing.contains(&store_key(r)))
                .collect();
            let mine = problem.as_ref().map_or(String::new(), |p| {
                format!("; this rank's own problem: {}", p.text)
            });
            let of = comm.group_name();
            Error::Mismatch {
                rank,
                group: of.clone(),
                message: format!(
                    "{what}: ranks {ranks:?}{of} did not make this call within {timeout:?} (a rank \
                     that skipped it or made another collective, or had an argument error on \
                     a call its peers had already checked){mine}"
                ),
            }
        }
        other => store_err(other),
    })?;
    let mut entries = Vec::with_capacity(world);
    for k in &keys {
        let raw = store.try_get(k).map_err(store_err)?.unwrap_or_default();
        entries.push(
            decode(&raw).unwrap_or_else(|| (0, "?".into(), Some("an unreadable entry".into()))),
        );
    }
    verdict(what, rank, comm.group_name(), &entries)?;
    let mut s = agreed.keys.lock().unwrap_or_else(|p| p.into_inner());
    // Bounded (calls of ever new sizes must not grow it for good): every
    // rank inserts the same keys in the same order, after the same
    // verdict, so every rank forgets them at the same call, and the next
    // call of each agrees again.
    if s.0.len() >= MAX_AGREED {
        s.0.clear();
    }
    s.0.insert(hash);
    Ok(Agreement::Agreed(hash))
}

/// The verdict on every rank's entry (hash, words, problem): every rank's
/// problem, or the calls that differ, or `Ok` when all are the same call.
/// Ranks are named as `rank r`, or, in a subgroup (`group`, its label),
/// `rank r of group <label>`, so that an error that crossed groups says
/// whose rank it means.
fn verdict(
    what: &str,
    rank: usize,
    group: &GroupName,
    entries: &[(u64, String, Option<Problem>)],
) -> Result<()> {
    let name = |r: usize| format!("rank {r}{group}");
    let problems: Vec<(usize, &Problem)> = entries
        .iter()
        .enumerate()
        .filter_map(|(r, (_, _, p))| Some((r, p.as_ref()?)))
        .collect();
    if let Some((_, first)) = problems.first() {
        let each: Vec<String> = problems
            .iter()
            .map(|(r, p)| format!("{}: {}", name(*r), p.text))
            .collect();
        return Err(Error::with_kind(
            first.kind,
            rank,
            group.clone(),
            format!("{what}: {}", each.join("; ")),
        ));
    }
    if entries.iter().any(|(h, _, _)| *h != entries[0].0) {
        if entries.iter().all(|(_, w, _)| *w == entries[0].1) {
            return Err(Error::Mismatch {
                rank,
                group: group.clone(),
                message: format!(
                    "{what}: the ranks' calls read alike ({}) but hash differently: the ranks \
                     run different builds of symm (every rank of a group must run one build)",
                    entries[0].1
                ),
            });
        }
        let each: Vec<String> = entries
            .iter()
            .enumerate()
            .map(|(r, (_, words, _))| format!("{}: {words}", name(r)))
            .collect();
        return Err(Error::Mismatch {
            rank,
            group: group.clone(),
            message: format!(
                "{what}: the ranks' calls differ (every rank must make the same call): {}",
                each.join("; ")
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{decode, encode, verdict, ErrorKind, GroupName, Problem};

    #[test]
    fn entries_round_trip() {
        let problem = Problem {
            kind: ErrorKind::Unsupported,
            text: "too small".into(),
        };
        let raw = encode(42, "all_gather of 8 elements of f32 (LL)", Some(&problem));
        assert_eq!(
            decode(&raw),
            Some((
                42,
                "all_gather of 8 elements of f32 (LL)".into(),
                Some(problem)
            ))
        );
        assert_eq!(decode(&encode(1, "x", None)), Some((1, "x".into(), None)));
        assert_eq!(decode(&raw[..20]), None);
    }

    /// Every rank reports the first problem's kind, with every rank's text.
    #[test]
    fn the_verdict_has_the_first_problems_kind() {
        let p = |kind, text: &str| {
            Some(Problem {
                kind,
                text: text.into(),
            })
        };
        let entries = [
            (7, "call".to_string(), None),
            (7, "call".to_string(), p(ErrorKind::Capacity, "no room")),
            (7, "call".to_string(), p(ErrorKind::InvalidArgument, "bad")),
        ];
        let e = verdict("x", 0, &GroupName::NONE, &entries).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Capacity, "{e}");
        assert_eq!(e.to_string(), "rank 0: x: rank 1: no room; rank 2: bad");
        // In a subgroup, every rank the text names is the subgroup's.
        let sub = GroupName::of("symm.split0[1,3,5]");
        let e = verdict("x", 0, &sub, &entries).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rank 0 of group symm.split0[1,3,5]: x: rank 1 of group symm.split0[1,3,5]: no room; rank 2 of group \
             symm.split0[1,3,5]: bad"
        );
        let same = [(7, "a".to_string(), None), (7, "a".to_string(), None)];
        assert!(verdict("x", 0, &GroupName::NONE, &same).is_ok());
        let differ = [(7, "a".to_string(), None), (8, "b".to_string(), None)];
        assert_eq!(
            verdict("x", 1, &GroupName::NONE, &differ)
                .unwrap_err()
                .kind(),
            ErrorKind::Mismatch
        );
    }
}
