//! Memory layout of one symmetric allocation, and of its signal pad.
//!
//! An allocation is one physical block per rank:
//!
//! ```text
//! offset 0                      pad_offset                 pad_offset + SIGNAL_PAD_BYTES
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

/// Largest world size the signal pad has room for: the most ranks of a
/// group whose memory is mapped, one NVLink domain's.
pub const MAX_WORLD_SIZE: usize = 8;

/// Largest group: ranks across every NVLink domain, of which each domain
/// holds at most [`MAX_WORLD_SIZE`] (a group that spans domains maps no
/// memory across them, so it has no signal pad of its whole size).
pub const MAX_GROUP_SIZE: usize = 4096;

/// A world size outside `1..=`[`MAX_WORLD_SIZE`], where [`with_world!`]
/// was to turn it into a const generic.
///
/// [`with_world!`]: crate::with_world
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("world size {world} is not supported; symm groups have 1 to {MAX_WORLD_SIZE} ranks")]
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

/// Number of `u32` slots in a signal pad.
pub const SIGNAL_PAD_SLOTS: usize = SIGNAL_CHANNELS * SIGNAL_BLOCKS * MAX_WORLD_SIZE;

/// Size of every allocation's signal pad, in bytes.
pub const SIGNAL_PAD_BYTES: usize = SIGNAL_PAD_SLOTS * 4;

/// Index of the `u32` slot through which `peer` signals this rank on
/// `channel` from block `block`, or `None` when any index is out of range.
pub const fn signal_slot(channel: usize, block: usize, peer: usize) -> Option<usize> {
    if channel >= SIGNAL_CHANNELS || block >= SIGNAL_BLOCKS || peer >= MAX_WORLD_SIZE {
        return None;
    }
    Some(slot_index(channel as u32, block as u32, peer as u32) as usize)
}

/// The slot formula itself, unchecked and wrapping, as the host computes
/// it. Kernels compute it with the DSL's `signal_slot` (one source for the
/// GPU and the emulator), which a test checks against this one.
pub const fn slot_index(channel: u32, block: u32, peer: u32) -> u32 {
    channel
        .wrapping_mul(SIGNAL_BLOCKS as u32)
        .wrapping_add(block)
        .wrapping_mul(MAX_WORLD_SIZE as u32)
        .wrapping_add(peer)
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
    /// Lays out `data_bytes` of data plus a signal pad, rounded up to the
    /// allocation `granularity` (a power of two). `None` on overflow.
    pub fn new(data_bytes: usize, granularity: usize) -> Option<AllocLayout> {
        if !granularity.is_power_of_two() {
            return None;
        }
        let pad_offset = round_up(data_bytes, DATA_ALIGN)?;
        let total = round_up(
            pad_offset.checked_add(SIGNAL_PAD_BYTES)?,
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
    const _: () = assert!(SIGNAL_BLOCKS >= 32 && MAX_WORLD_SIZE >= 8 && SIGNAL_CHANNELS >= 4);

    #[test]
    fn slots_are_distinct_and_in_range() {
        let mut seen = vec![false; SIGNAL_PAD_SLOTS];
        for c in 0..SIGNAL_CHANNELS {
            for b in 0..SIGNAL_BLOCKS {
                for p in 0..MAX_WORLD_SIZE {
                    let s = signal_slot(c, b, p).expect("in range");
                    assert!(!seen[s], "slot {s} reused");
                    seen[s] = true;
                }
            }
        }
        assert!(seen.iter().all(|&x| x));
        assert_eq!(signal_slot(SIGNAL_CHANNELS, 0, 0), None);
        assert_eq!(signal_slot(0, SIGNAL_BLOCKS, 0), None);
        assert_eq!(signal_slot(0, 0, MAX_WORLD_SIZE), None);
    }

    #[test]
    fn layout_aligns_and_rounds() {
        let g = 2 << 20;
        for data in [0usize, 1, 127, 128, 129, 4095, g - 1, g, 3 * g + 5] {
            let l = AllocLayout::new(data, g).unwrap();
            assert_eq!(l.pad_offset % DATA_ALIGN, 0);
            assert!(l.pad_offset >= data && l.pad_offset < data + DATA_ALIGN);
            assert_eq!(l.total_bytes % g, 0);
            assert!(l.total_bytes >= l.pad_offset + SIGNAL_PAD_BYTES);
            assert!(l.total_bytes < l.pad_offset + SIGNAL_PAD_BYTES + g);
        }
        assert_eq!(AllocLayout::new(usize::MAX - 10, g), None);
        assert_eq!(AllocLayout::new(16, 3), None);
    }
}
