//! Signal channels as a resource of the group.
//!
//! Every signal pad has [`SIGNAL_CHANNELS`] channels, and one channel may
//! serve only one protocol at a time: two users signalling on the same
//! slots would consume each other's signals. So nobody numbers channels by
//! hand; they are requested from the rank's [`Comm`], as NCCL's device API
//! has resources requested from the communicator. The application counts
//! up from channel 0 ([`Channel::request`]); libraries such as the built-in
//! all-reduce reserve theirs from the top, once per owner
//! ([`Channel::reserve`]). A channel holds on every pad of the group, since
//! a library signals on whatever buffer it is handed.
//!
//! The bookkeeping is per rank (a [`Comm::extension`]), so ranks agree as
//! long as they make the same requests in the same order, the rule that
//! allocations follow too.

use std::fmt;
use std::sync::Mutex;

use crate::comm::Comm;
use crate::error::Result;
use crate::layout::SIGNAL_CHANNELS;

/// A signal channel of a group, requested from its [`Comm`].
///
/// Host signal operations ([`crate::SymmetricMemory::barrier`] and friends)
/// take one, and refuse one of another rank or group; kernels take its
/// index as a `u32` argument (`ch.index()` or `u32::from(ch)`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Channel {
    index: u32,
    /// The rank state it was requested on ([`Comm`]'s clones share it).
    owner: usize,
    rank: usize,
}

/// Who holds each channel of a rank's pads.
#[derive(Default)]
struct Table {
    owners: Mutex<[Option<Owner>; SIGNAL_CHANNELS]>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// Requested by the application.
    Application,
    /// Reserved by a library, under this name.
    Library(&'static str),
}

impl Channel {
    /// The lowest free channel of `comm`'s group, for the application.
    ///
    /// Every rank must make its requests in the same order (as with
    /// [`Comm::alloc`]) to get the same channels. A channel stays taken for
    /// the group's life (a pad has 8, a few of them the built-ins'), so
    /// request once and reuse it; code that runs many times (a library's
    /// collective) reserves its channels with [`Channel::reserve`], which
    /// gives the same ones on every call. Fails when every channel is
    /// taken, naming who holds them.
    pub fn request(comm: &Comm) -> Result<Channel> {
        let table = table(comm)?;
        let mut owners = table.owners.lock().unwrap_or_else(|p| p.into_inner());
        match owners.iter().position(Option::is_none) {
            Some(i) => {
                owners[i] = Some(Owner::Application);
                Ok(Channel::new(comm, i))
            }
            None => Err(comm.capacity(full(&owners, "the application", 1))),
        }
    }

    /// `N` adjacent channels (ascending) of `comm`'s group reserved for
    /// `owner`, a library's name (such as `"symm_kernels::all_reduce"`):
    /// the highest free run the first time, the same channels on every
    /// later call. Libraries reserve from the top and the application
    /// requests from the bottom, so neither's numbers depend on the other's
    /// unless the pad is full, which is an error.
    pub fn reserve<const N: usize>(comm: &Comm, owner: &'static str) -> Result<[Channel; N]> {
        let table = table(comm)?;
        let mut owners = table.owners.lock().unwrap_or_else(|p| p.into_inner());
        let mine = Some(Owner::Library(owner));
        let held: Vec<usize> = (0..SIGNAL_CHANNELS)
            .filter(|&i| owners[i] == mine)
            .collect();
        let first = if held.is_empty() {
            let free = |s: usize| (s..s + N).all(|i| owners[i].is_none());
            let Some(first) = (0..=SIGNAL_CHANNELS.saturating_sub(N))
                .rev()
                .find(|&s| s + N <= SIGNAL_CHANNELS && free(s))
            else {
                return Err(comm.capacity(full(&owners, owner, N)));
            };
            owners[first..first + N].fill(mine);
            first
        } else if held.len() == N {
            held[0]
        } else {
            return Err(comm.invalid(format!(
                "`{owner}` reserved {} signal channels before and asks for {N} now; \
                 a library reserves one fixed set",
                held.len()
            )));
        };
        Ok(std::array::from_fn(|k| Channel::new(comm, first + k)))
    }

    fn new(comm: &Comm, index: usize) -> Channel {
        Channel {
            index: index as u32,
            owner: comm.owner_id(),
            rank: comm.rank(),
        }
    }

    /// The channel's number in every signal pad, as kernels take it.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Identifies the rank state this channel was requested on.
    pub(crate) fn owner(&self) -> usize {
        self.owner
    }

    /// The rank this channel was requested on.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }
}

impl From<&Channel> for u32 {
    fn from(c: &Channel) -> u32 {
        c.index
    }
}

impl From<Channel> for u32 {
    fn from(c: Channel) -> u32 {
        c.index
    }
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Channel({} of rank {})", self.index, self.rank)
    }
}

/// `comm`'s channel table, made on first use.
fn table(comm: &Comm) -> Result<std::sync::Arc<Table>> {
    comm.extension(|_: &Table| true, |_| Ok(Table::default()))
}

/// Why `who` cannot get `n` channels: who holds which.
fn full(owners: &[Option<Owner>; SIGNAL_CHANNELS], who: &str, n: usize) -> String {
    let mut held: Vec<String> = Vec::new();
    for (i, o) in owners.iter().enumerate() {
        let name = match o {
            None => "free".to_string(),
            Some(Owner::Application) => "the application".to_string(),
            Some(Owner::Library(l)) => format!("`{l}`"),
        };
        held.push(format!("{i}: {name}"));
    }
    format!(
        "no {n} free adjacent signal channel(s) for {who}: a signal pad has {SIGNAL_CHANNELS} \
         ({}); request channels once and reuse them",
        held.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::InProcessStore;
    use crate::{CommOptions, Error};

    fn comms(world: usize) -> Vec<Comm> {
        let store: Arc<dyn crate::Store> = Arc::new(InProcessStore::new());
        (0..world)
            .map(|r| Comm::emulated(r, world, store.clone(), CommOptions::default()).expect("comm"))
            .collect()
    }

    fn indices<const N: usize>(c: [Channel; N]) -> [u32; N] {
        c.map(|c| c.index())
    }

    #[test]
    fn requests_are_deterministic_and_disjoint_from_reservations() {
        let ranks = comms(2);
        // The same sequence of requests on every rank, interleaved
        // differently in time, gives the same channels.
        let mut got = Vec::new();
        for c in &ranks {
            let a = Channel::request(c).unwrap().index();
            let lib = indices(Channel::reserve::<3>(c, "lib").unwrap());
            let b = Channel::request(c).unwrap().index();
            let again = indices(Channel::reserve::<3>(c, "lib").unwrap());
            got.push((a, lib, b, again));
        }
        assert_eq!(got[0], got[1]);
        let (a, lib, b, again) = got[0];
        assert_eq!((a, b), (0, 1));
        assert_eq!(lib, [5, 6, 7]);
        assert_eq!(again, lib, "a library gets the same channels every time");
        // A reservation made first does not move the application's numbers.
        let c = &comms(1)[0];
        let lib = indices(Channel::reserve::<3>(c, "lib").unwrap());
        assert_eq!(lib, [5, 6, 7]);
        assert_eq!(Channel::request(c).unwrap().index(), 0);
    }

    #[test]
    fn a_full_pad_is_a_clear_error() {
        let c = &comms(1)[0];
        let lib = Channel::reserve::<3>(c, "symm_kernels::all_reduce").unwrap();
        let mine: Vec<u32> = (0..SIGNAL_CHANNELS - 3)
            .map(|_| Channel::request(c).unwrap().index())
            .collect();
        assert_eq!(mine, [0, 1, 2, 3, 4]);
        for e in [
            Channel::request(c).unwrap_err(),
            Channel::reserve::<1>(c, "other").unwrap_err(),
        ] {
            let Error::Capacity { rank: 0, message } = &e else {
                panic!("{e:?}");
            };
            for needle in [
                "a signal pad has 8",
                "0: the application",
                "7: `symm_kernels::all_reduce`",
            ] {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            }
        }
        // The library's own channels are still its own.
        assert_eq!(
            Channel::reserve::<3>(c, "symm_kernels::all_reduce").unwrap(),
            lib
        );
        let e = Channel::reserve::<2>(c, "symm_kernels::all_reduce").unwrap_err();
        assert!(e.to_string().contains("reserved 3"), "{e}");
    }

    #[test]
    fn libraries_take_adjacent_runs_from_the_top() {
        let c = &comms(1)[0];
        assert_eq!(indices(Channel::reserve::<2>(c, "a").unwrap()), [6, 7]);
        assert_eq!(Channel::request(c).unwrap().index(), 0);
        assert_eq!(indices(Channel::reserve::<3>(c, "b").unwrap()), [3, 4, 5]);
        assert_eq!(indices(Channel::reserve::<2>(c, "c").unwrap()), [1, 2]);
        assert!(Channel::reserve::<1>(c, "d").is_err());
        let other = &comms(1)[0];
        assert_ne!(
            Channel::request(other).unwrap(),
            Channel::new(c, 0),
            "channels of different groups differ"
        );
        assert_eq!(u32::from(&Channel::new(c, 4)), 4);
    }
}
