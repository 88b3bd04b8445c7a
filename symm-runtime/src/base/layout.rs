//! Memory layout of one symmetric allocation, and of its signal pad.
//!
//! An allocation is one physical block per rank:
//!
//! ```text
//! offset 0                      pad_offset                 pad_offset + pad_bytes(world)
//! | data (len × size_of<T>) ... | signal pad (u32 slots) ... | granularity padding |
//! ```
//!
//! Data starts at offset 0 of a granularity-aligned mapping, so it is at least
//! [`DATA_ALIGN`]-byte aligned. The signal pad starts at the next
//! [`DATA_ALIGN`] boundary after the data and is zeroed at allocation.
//!
//! The pad is an array of `u32` slots indexed by
//! [`signal_slot`]`(channel, block, peer)`: the slot that `peer` writes to
//! signal this rank on `channel` from block `block`. Each (channel, block,
//! peer) triple owns a distinct slot, so blocks and channels never interfere.
//! Peers come in groups of [`PAD_PEER_GROUP`]: a group's slots for one
//! (channel, block) are adjacent (one 32-byte sector for a wait on all of
//! them), and each further group of peers appends [`PAD_GROUP_SLOTS`] slots,
//! so a pad has room for its group's ranks and no more ([`pad_slots`]).

/// Alignment of the data region, in bytes. 128 covers 16-byte vector access
/// and whole cache lines.
pub const DATA_ALIGN: usize = 128;

/// Number of independent signal channels in every pad. Who uses which is
/// decided by requesting them from the group
/// ([`Channel`](crate::signal::Channel)), never by number: the first
/// [`APP_CHANNELS`] are the application's, the rest the libraries' (the
/// built-in collectives'), so neither can take the other's.
pub const SIGNAL_CHANNELS: usize = 32;

/// The channels of every pad that only the application requests
/// ([`Channel::request`](crate::signal::Channel::request)): channels
/// `0..APP_CHANNELS`. Libraries reserve from the others.
pub const APP_CHANNELS: usize = 16;

const _: () = assert!(APP_CHANNELS < SIGNAL_CHANNELS);

/// Number of blocks that may signal concurrently on one channel.
pub const SIGNAL_BLOCKS: usize = 128;

/// Largest world that [`with_world!`] instantiates a const generic for,
/// and the width of one DSL gather (its rank mask): the worlds that kernels
/// unrolled per rank have fast paths for. A domain may hold more
/// ([`MAX_DOMAIN_SIZE`]); its kernels take their world at run time.
///
/// [`with_world!`]: crate::with_world
pub const MAX_WORLD_SIZE: usize = 8;

/// Largest group whose memory is mapped: one NVLink domain's ranks (a
/// multi-node NVLink rack's 72 GPUs). Signal pads, the call ledger and the
/// emulator have room for this many.
pub const MAX_DOMAIN_SIZE: usize = 72;

/// Largest group: ranks across every NVLink domain, of which each domain
/// holds at most [`MAX_DOMAIN_SIZE`] (a group that spans domains maps no
/// memory across them, so it has no signal pad of its whole size).
pub const MAX_GROUP_SIZE: usize = 4096;

/// A world size outside `1..=`[`MAX_WORLD_SIZE`], where [`with_world!`]
/// was to turn it into a const generic.
///
/// [`with_world!`]: crate::with_world
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "world size {world} is not supported by kernels unrolled per world, which cover 1 to \
     {MAX_WORLD_SIZE} ranks (a larger domain takes kernels that read their world at run time)"
)]
pub struct WorldSizeError {
    /// The world size given (`i128::MAX` for a `u128` beyond it).
    pub world: i128,
}

/// The world size `with_world!` was given, widened so that negative and
/// huge values are reported as written rather than wrapped into range.
#[doc(hidden)]
pub fn __world_size<W: TryInto<i128>>(world: W) -> i128 {
    world.try_into().unwrap_or(i128::MAX)
}

// `with_world!` has one arm per world size.
const _: () = assert!(MAX_WORLD_SIZE == 8);

/// Peers whose slots for one (channel, block) are adjacent in a pad.
pub const PAD_PEER_GROUP: usize = 8;

/// `u32` slots of one group of [`PAD_PEER_GROUP`] peers: every channel's
/// and block's.
pub const PAD_GROUP_SLOTS: usize = SIGNAL_CHANNELS * SIGNAL_BLOCKS * PAD_PEER_GROUP;

/// `u32` slots in the signal pad of a group of `world` ranks (at most
/// [`MAX_DOMAIN_SIZE`] count: a larger group maps no memory): one
/// [`PAD_GROUP_SLOTS`] per group of [`PAD_PEER_GROUP`] peers, so a world
/// of up to 8 has the pad of 128 KiB it always had.
pub const fn pad_slots(world: usize) -> usize {
    let w = if world < MAX_DOMAIN_SIZE {
        world
    } else {
        MAX_DOMAIN_SIZE
    };
    let groups = w.div_ceil(PAD_PEER_GROUP);
    (if groups == 0 { 1 } else { groups }) * PAD_GROUP_SLOTS
}

/// Bytes of the signal pad of a group of `world` ranks ([`pad_slots`]).
pub const fn pad_bytes(world: usize) -> usize {
    pad_slots(world) * 4
}

/// Index of the `u32` slot through which `peer` signals this rank on
/// `channel` from block `block`, or `None` when any index is out of range
/// (a `peer` of [`MAX_DOMAIN_SIZE`] or more; a pad holds only its own
/// world's, [`pad_slots`]).
pub const fn signal_slot(channel: usize, block: usize, peer: usize) -> Option<usize> {
    if channel >= SIGNAL_CHANNELS || block >= SIGNAL_BLOCKS || peer >= MAX_DOMAIN_SIZE {
        return None;
    }
    Some(slot_index(channel as u32, block as u32, peer as u32) as usize)
}

/// The slot formula itself, unchecked and wrapping, as the host computes
/// it. Kernels compute it with the DSL's `signal_slot` (one source for the
/// GPU and the emulator), which a test checks against this one.
pub const fn slot_index(channel: u32, block: u32, peer: u32) -> u32 {
    let in_group = channel
        .wrapping_mul(SIGNAL_BLOCKS as u32)
        .wrapping_add(block)
        .wrapping_mul(PAD_PEER_GROUP as u32)
        .wrapping_add(peer % PAD_PEER_GROUP as u32);
    (peer / PAD_PEER_GROUP as u32)
        .wrapping_mul(PAD_GROUP_SLOTS as u32)
        .wrapping_add(in_group)
}

/// Rounds `n` up to a multiple of `align` (a power of two), or `None` on overflow.
pub const fn round_up(n: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    match n.checked_add(align - 1) {
        Some(v) => Some(v & !(align - 1)),
        None => None,
    }
}

/// Byte layout of one rank's symmetric allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocLayout {
    /// Bytes of user data.
    pub data_bytes: usize,
    /// Offset of the signal pad from the allocation's start.
    pub pad_offset: usize,
    /// Bytes actually reserved and mapped (a multiple of the granularity).
    pub total_bytes: usize,
}

impl AllocLayout {
    /// Lays out `data_bytes` of data plus the signal pad of a group of
    /// `world` ranks, rounded up to the allocation `granularity` (a power
    /// of two). `None` on overflow.
    pub fn new(data_bytes: usize, granularity: usize, world: usize) -> Option<AllocLayout> {
        if !granularity.is_power_of_two() {
            return None;
        }
        let pad_offset = round_up(data_bytes, DATA_ALIGN)?;
        let total = round_up(
            pad_offset.checked_add(pad_bytes(world))?,
            granularity.max(DATA_ALIGN),
        )?;
        Some(AllocLayout {
            data_bytes,
            pad_offset,
            total_bytes: total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The pad must hold at least 32 blocks × 8 ranks × 4 channels.
    const _: () = assert!(SIGNAL_BLOCKS >= 32 && PAD_PEER_GROUP >= 8 && SIGNAL_CHANNELS >= 4);

    #[test]
    fn slots_are_distinct_and_in_range() {
        for world in [1, 8, 9, 16, 17, MAX_DOMAIN_SIZE] {
            let mut seen = vec![false; pad_slots(world)];
            for c in 0..SIGNAL_CHANNELS {
                for b in 0..SIGNAL_BLOCKS {
                    for p in 0..world {
                        let s = signal_slot(c, b, p).expect("in range");
                        assert!(!seen[s], "slot {s} reused at world {world}");
                        seen[s] = true;
                    }
                }
            }
            // Whole groups of 8 peers, so only a partial last group leaves gaps.
            if world % PAD_PEER_GROUP == 0 {
                assert!(seen.iter().all(|&x| x), "world {world}");
            }
        }
        // A world of up to 8 keeps the one formula and pad it always had.
        assert_eq!(pad_bytes(1), 128 << 10);
        assert_eq!(pad_bytes(8), 128 << 10);
        assert_eq!(pad_bytes(9), 256 << 10);
        assert_eq!(pad_bytes(MAX_DOMAIN_SIZE), pad_bytes(4096));
        assert_eq!(signal_slot(3, 5, 6), Some((3 * SIGNAL_BLOCKS + 5) * 8 + 6));
        assert_eq!(signal_slot(SIGNAL_CHANNELS, 0, 0), None);
        assert_eq!(signal_slot(0, SIGNAL_BLOCKS, 0), None);
        assert_eq!(signal_slot(0, 0, MAX_DOMAIN_SIZE), None);
    }

    #[test]
    fn layout_aligns_and_rounds() {
        let g = 2 << 20;
        for data in [0usize, 1, 127, 128, 129, 4095, g - 1, g, 3 * g + 5] {
            for world in [1, 8, 9, MAX_DOMAIN_SIZE] {
                let l = AllocLayout::new(data, g, world).unwrap();
                let pad = pad_bytes(world);
                assert_eq!(l.pad_offset % DATA_ALIGN, 0);
                assert!(l.pad_offset >= data && l.pad_offset < data + DATA_ALIGN);
                assert_eq!(l.total_bytes % g, 0);
                assert!(l.total_bytes >= l.pad_offset + pad);
                assert!(l.total_bytes < l.pad_offset + pad + g);
            }
        }
        assert_eq!(AllocLayout::new(usize::MAX - 10, g, 2), None);
        assert_eq!(AllocLayout::new(16, 3, 2), None);
    }
}
