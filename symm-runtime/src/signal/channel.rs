//! Signal channels as a resource of the group.
//!
//! Every signal pad has [`SIGNAL_CHANNELS`] channels, and one channel may
//! serve only one protocol at a time: two users signalling on the same
//! slots would consume each other's signals. So nobody numbers channels by
//! hand; they are requested from the rank's [`Comm`], as NCCL's device API
//! has resources requested from the communicator. The pad is split in
//! two: the application's [`APP_CHANNELS`], which it requests counting up
//! from channel 0 ([`Channel::request`]), and the libraries' (such as the
//! built-in collectives), which each reserve theirs from the top, once per
//! owner ([`Channel::reserve`]). Neither side can take the other's, so an
//! application that holds all its channels still runs every built-in, and
//! the built-ins never leave the application fewer. A channel holds on
//! every pad of the group, since a library signals on whatever buffer it
//! is handed.
//!
//! The bookkeeping is per rank (a [`Comm::extension`]), so ranks agree as
//! long as they make the same requests in the same order, the rule that
//! allocations follow too.

use std::fmt;
use std::sync::Mutex;

use crate::comm::Comm;
use crate::error::Result;
use crate::layout::{APP_CHANNELS, SIGNAL_CHANNELS};

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
    /// The lowest free channel of `comm`'s group among the application's
    /// [`APP_CHANNELS`] (channels `0..APP_CHANNELS`, which no library
    /// takes).
    ///
    /// Every rank must make its requests in the same order (as with
    /// [`Comm::alloc`]) to get the same channels. A channel stays taken for
    /// the group's life, so request once and reuse it; code that runs many
    /// times (a library's collective) reserves its channels with
    /// [`Channel::reserve`], which gives the same ones on every call. Fails
    /// when the application holds all of its channels, naming who holds
    /// which.
    pub fn request(comm: &Comm) -> Result<Channel> {
        let table = table(comm)?;
        let mut owners = table.owners.lock().unwrap_or_else(|p| p.into_inner());
        match owners[..APP_CHANNELS].iter().position(Option::is_none) {
            Some(i) => {
                owners[i] = Some(Owner::Application);
                Ok(Channel::new(comm, i))
            }
            None => Err(comm.capacity(full(&owners, "the application", 1))),
        }
    }

    /// `N` adjacent channels (ascending) of `comm`'s group reserved for
    /// `owner`, a library's name (such as `"symm_kernels::all_reduce"`):
    /// the highest free run of the libraries' channels (`APP_CHANNELS..`)
    /// the first time, the same channels on every later call. Libraries
    /// never take the application's channels, so neither's numbers depend
    /// on the other's; no free run of `N` is an error.
    pub fn reserve<const N: usize>(comm: &Comm, owner: &'static str) -> Result<[Channel; N]> {
        let table = table(comm)?;
        let mut owners = table.owners.lock().unwrap_or_else(|p| p.into_inner());
        let mine = Some(Owner::Library(owner));
        let held: Vec<usize> = (0..SIGNAL_CHANNELS)
            .filter(|&i| owners[i] == mine)
            .collect();
        let first = if held.is_empty() {
            let free = |s: usize| (s..s + N).all(|i| owners[i].is_none());
            let Some(first) = (APP_CHANNELS..=SIGNAL_CHANNELS.saturating_sub(N))
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

/// Why `who` cannot get `n` channels: who holds which, in runs (`0-15:
/// the application`), so the text stays short.
fn full(owners: &[Option<Owner>; SIGNAL_CHANNELS], who: &str, n: usize) -> String {
    let name = |o: &Option<Owner>| match o {
        None => "free".to_string(),
        Some(Owner::Application) => "the application".to_string(),
        Some(Owner::Library(l)) => format!("`{l}`"),
    };
    let mut held: Vec<String> = Vec::new();
    let mut start = 0;
    for i in 1..=SIGNAL_CHANNELS {
        if i == SIGNAL_CHANNELS || i == APP_CHANNELS || owners[i] != owners[start] {
            let range = if i - 1 == start {
                format!("{start}")
            } else {
                format!("{start}-{}", i - 1)
            };
            held.push(format!("{range}: {}", name(&owners[start])));
            start = i;
        }
    }
    format!(
        "no {n} free adjacent signal channel(s) for {who}: a signal pad has {APP_CHANNELS} \
         channels for the application (0-{}) and {} for libraries ({}); request channels once \
         and reuse them",
        APP_CHANNELS - 1,
        SIGNAL_CHANNELS - APP_CHANNELS,
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
        assert_eq!(lib, [29, 30, 31]);
        assert_eq!(again, lib, "a library gets the same channels every time");
        // A reservation made first does not move the application's numbers.
        let c = &comms(1)[0];
        let lib = indices(Channel::reserve::<3>(c, "lib").unwrap());
        assert_eq!(lib, [29, 30, 31]);
        assert_eq!(Channel::request(c).unwrap().index(), 0);
    }

    #[test]
    fn the_application_and_the_libraries_never_take_each_others_channels() {
        let c = &comms(1)[0];
        let lib = Channel::reserve::<3>(c, "symm_kernels::all_reduce").unwrap();
        let mine: Vec<u32> = (0..APP_CHANNELS)
            .map(|_| Channel::request(c).unwrap().index())
            .collect();
        assert_eq!(mine, (0..APP_CHANNELS as u32).collect::<Vec<_>>());
        // The application holds all of its own: a 17th is an error, and
        // libraries still reserve theirs.
        let e = Channel::request(c).unwrap_err();
        let Error::Capacity {
            rank: 0, message, ..
        } = &e
        else {
            panic!("{e:?}");
        };
        for needle in [
            "16 channels for the application (0-15) and 16 for libraries",
            "0-15: the application",
            "16-28: free",
            "29-31: `symm_kernels::all_reduce`",
        ] {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
        let more = indices(Channel::reserve::<13>(c, "other").unwrap());
        assert_eq!(more, std::array::from_fn(|k| 16 + k as u32));
        let e = Channel::reserve::<1>(c, "third").unwrap_err();
        assert!(matches!(e, Error::Capacity { .. }), "{e:?}");
        assert!(e.to_string().contains("16-28: `other`"), "{e}");
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
        assert_eq!(indices(Channel::reserve::<2>(c, "a").unwrap()), [30, 31]);
        assert_eq!(Channel::request(c).unwrap().index(), 0);
        assert_eq!(
            indices(Channel::reserve::<3>(c, "b").unwrap()),
            [27, 28, 29]
        );
        assert_eq!(
            indices(Channel::reserve::<10>(c, "c").unwrap()),
            [17, 18, 19, 20, 21, 22, 23, 24, 25, 26]
        );
        // One library channel is left: a run of two does not fit, nor does
        // it spill into the application's.
        assert!(Channel::reserve::<2>(c, "d").is_err());
        assert_eq!(indices(Channel::reserve::<1>(c, "e").unwrap()), [16]);
        let other = &comms(1)[0];
        assert_ne!(
            Channel::request(other).unwrap(),
            Channel::new(c, 0),
            "channels of different groups differ"
        );
        assert_eq!(u32::from(&Channel::new(c, 4)), 4);
    }
}
