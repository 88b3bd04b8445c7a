//! Cross-rank argument checks for the collectives: on the first call of a
//! shape, every rank publishes its call's shape (and any local problem
//! with its arguments) through the group's store and reads every other
//! rank's, so a mismatch, or a bad argument on one rank, is the same clear
//! error on every rank instead of a kernel waiting for data that never
//! comes. Later calls of a shape the group agreed on cost a hash lookup.

use std::collections::HashSet;
use std::sync::Mutex;

use symm::{Comm, Error, Result};

/// Shapes this rank's group agreed on, and how many exchanges it made (the
/// store keys' sequence: ranks make the same calls in the same order, so
/// the n-th exchange of each rank meets the n-th of the others).
#[derive(Default)]
struct Agreed {
    shapes: Mutex<(HashSet<Vec<u64>>, u64)>,
}

/// Shapes a rank remembers as agreed; past this many it forgets them all
/// (a few MB; the all-reduce's own set of 1024 identities falls back on
/// this one, so it must be much larger than that).
const MAX_AGREED: usize = 1 << 16;

/// What one rank says of a call: its shape, and its local problem if any.
fn encode(shape: &[u64], problem: Option<&str>) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + shape.len() * 8);
    v.extend_from_slice(&(shape.len() as u64).to_le_bytes());
    for x in shape {
        v.extend_from_slice(&x.to_le_bytes());
    }
    if let Some(p) = problem {
        v.extend_from_slice(p.as_bytes());
    }
    v
}

fn decode(raw: &[u8]) -> Option<(Vec<u64>, String)> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            raw.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let len = usize::try_from(word(0)?).ok()?;
    let shape = (1..=len).map(word).collect::<Option<Vec<u64>>>()?;
    let rest = raw.get((len + 1) * 8..)?;
    Some((shape, String::from_utf8_lossy(rest).into_owned()))
}

/// Checks that every rank of `comm`'s group makes the same call `what`:
/// `shape` (the collective, element type, sizes, op, root, …, as numbers)
/// must be equal on every rank, and no rank may have a `problem` with its
/// own arguments. `describe` spells a shape for the error. Returns at once
/// for a shape the group agreed on before (with this rank's problem, if
/// any: the kernels' own signature check catches what differs later).
/// Otherwise it waits (at most the group's timeout) for every rank's
/// entry; every rank then returns the same verdict.
pub(crate) fn agree(
    comm: &Comm,
    what: &str,
    shape: &[u64],
    problem: Option<String>,
    describe: impl Fn(&[u64]) -> String,
) -> Result<()> {
    let agreed = comm.extension(|_: &Agreed| true, |_| Ok(Agreed::default()))?;
    let seq = {
        let mut s = agreed.shapes.lock().unwrap_or_else(|p| p.into_inner());
        if s.0.contains(shape) {
            // The peers, with nothing to report, run the call without an
            // exchange; this rank's problem stays its own (and its peers'
            // kernels time out waiting for it, naming it). Joining an
            // exchange here would leave this rank's sequence one ahead of
            // theirs for good.
            return match problem {
                None => Ok(()),
                Some(p) => Err(Error::InvalidArgument {
                    rank: comm.rank(),
                    message: format!("{what}: {p}"),
                }),
            };
        }
        s.1 += 1;
        s.1
    };
    let (rank, world) = (comm.rank(), comm.world_size());
    let store = comm.store();
    let key = |r: usize| comm.store_key(&format!("symm_kernels/collectives/agree/{seq}/{r}"));
    let store_err = |source| comm.store_error(source);
    store
        .set(&key(rank), &encode(shape, problem.as_deref()))
        .map_err(store_err)?;
    let keys: Vec<String> = (0..world).map(key).collect();
    let timeout = comm.options().timeout;
    store.wait(&keys, timeout).map_err(|e| match e {
        symm::StoreError::Timeout { missing, .. } => {
            let ranks: Vec<usize> = (0..world).filter(|&r| missing.contains(&key(r))).collect();
            let mine = problem
                .as_deref()
                .map_or(String::new(), |p| format!("; this rank's own problem: {p}"));
            Error::InvalidArgument {
                rank,
                message: format!(
                    "{what}: ranks {ranks:?} did not make this call within {timeout:?} (a rank \
                     that skipped it or made another collective, or had an argument error on \
                     a shape its peers had already checked){mine}"
                ),
            }
        }
        other => store_err(other),
    })?;
    let mut entries = Vec::with_capacity(world);
    for k in &keys {
        let raw = store.try_get(k).map_err(store_err)?.unwrap_or_default();
        entries.push(decode(&raw).unwrap_or_else(|| (Vec::new(), "an unreadable entry".into())));
    }
    let problems: Vec<String> = entries
        .iter()
        .enumerate()
        .filter(|(_, (_, p))| !p.is_empty())
        .map(|(r, (_, p))| format!("rank {r}: {p}"))
        .collect();
    if !problems.is_empty() {
        return Err(Error::InvalidArgument {
            rank,
            message: format!("{what}: {}", problems.join("; ")),
        });
    }
    if entries.iter().any(|(s, _)| s != &entries[0].0) {
        let each: Vec<String> = entries
            .iter()
            .enumerate()
            .map(|(r, (s, _))| format!("rank {r}: {}", describe(s)))
            .collect();
        return Err(Error::InvalidArgument {
            rank,
            message: format!(
                "{what}: the ranks' calls differ (every rank must make the same call): {}",
                each.join("; ")
            ),
        });
    }
    let mut s = agreed.shapes.lock().unwrap_or_else(|p| p.into_inner());
    // Bounded (calls of ever new sizes must not grow it for good): every
    // rank inserts the same shapes in the same order, after the same
    // verdict, so every rank forgets them at the same call, and the next
    // call of each agrees again.
    if s.0.len() >= MAX_AGREED {
        s.0.clear();
    }
    s.0.insert(shape.to_vec());
    Ok(())
}
