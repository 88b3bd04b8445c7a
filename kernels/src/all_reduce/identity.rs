//! What identifies one all-reduce call across ranks, and the agreement on
//! it: once per identity through the store, then a compare.

use std::sync::Arc;

use symm::{Comm, DType, Result};

use super::device::{CHANNELS, CHANNEL_OWNER};
use super::plan::AllReducePath;
use crate::shared::agree::{agree, Problem};
use crate::shared::key::{digest, CallKey};

/// What identifies one all-reduce call across ranks: every rank of a call
/// passes the same. Ranks that pass different identities are in different
/// calls (one skipped a call, or made them in another order).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Identity {
    pub(super) dtype: DType,
    pub(super) n: usize,
    pub(super) path: AllReducePath,
    pub(super) alloc: u64,
    pub(super) offset: u64,
    pub(super) in_place: bool,
}

impl CallKey for Identity {
    const FAMILY: &'static str = "symm_kernels::all_reduce";

    fn name(&self) -> &'static str {
        "all_reduce"
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} of allocation #{} at byte {}{} by the {} kernel",
            self.n,
            self.dtype,
            self.alloc,
            self.offset,
            if self.in_place { " in place" } else { "" },
            self.path.name()
        )
    }
}

impl Identity {
    /// The digest the kernels compare across ranks, never 0 and never with
    /// its top bit clear (so a tag folded with it is never 0 on zeroed
    /// staging; see `one_shot_ll`).
    pub(super) fn sig(&self) -> u32 {
        digest(&[self.hash64()]) | 0x8000_0000
    }
}

/// The all-reduce's state on a rank: its channel, and the call identities
/// its group has agreed on.
pub(super) struct AllReduceState {
    pub(super) ch: u32,
    agreed: std::sync::Mutex<Agreed>,
}

/// The identities a rank's group agreed on, and the last one checked (most
/// loops repeat one call, or a few: a compare before the hash).
#[derive(Default)]
struct Agreed {
    last: Option<Identity>,
    all: std::collections::HashSet<Identity>,
}

/// Identities a rank remembers as agreed; past this many it forgets them
/// all (a pool that hands out tensors at ever new offsets must not grow
/// the set without bound), and the next call of each agrees again.
const MAX_AGREED: usize = 1024;

impl AllReduceState {
    /// Checks that every rank makes this call: once per identity through
    /// the group's store (with this rank's local `problem`, so a bad
    /// argument on one rank is the same error on all), then a hash lookup.
    pub(super) fn agree(
        &self,
        comm: &Comm,
        id: Identity,
        problem: Option<&symm::Error>,
    ) -> Result<()> {
        {
            let mut agreed = self.agreed.lock().unwrap_or_else(|p| p.into_inner());
            if agreed.last == Some(id) || agreed.all.contains(&id) {
                agreed.last = Some(id);
                return Ok(());
            }
        }
        agree(comm, &id, problem.map(Problem::from))?;
        let mut agreed = self.agreed.lock().unwrap_or_else(|p| p.into_inner());
        if agreed.all.len() >= MAX_AGREED {
            agreed.all.clear();
        }
        agreed.all.insert(id);
        agreed.last = Some(id);
        Ok(())
    }
}

/// The all-reduce's state on `comm`'s rank: its [`CHANNELS`] channels,
/// reserved on the first call ([`Channel::reserve`](symm::signal::Channel::reserve)),
/// and the identities agreed so far.
pub(super) fn state(comm: &Comm) -> Result<Arc<AllReduceState>> {
    comm.extension(
        |_: &AllReduceState| true,
        |_| {
            let chans = symm::signal::Channel::reserve::<CHANNELS>(comm, CHANNEL_OWNER)?;
            Ok(AllReduceState {
                ch: chans[0].index(),
                agreed: Default::default(),
            })
        },
    )
}
