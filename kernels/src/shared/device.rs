//! Device functions that every family's kernels share: the start of a
//! kernel launched with programmatic dependent launch, the spread grid
//! stride, the barrier kernels' entry and exit with the call's identity,
//! and the sums of the ranks past 8.

use symm::dsl::*;
use symm::symm_kernel;

/// First thing in every all-reduce kernel, which is launched with
/// programmatic dependent launch: wait for the previous kernel on the
/// stream (it may have written the input, or still use the output), and let
/// the next one start launching while this one runs.
#[symm_kernel(device)]
pub(crate) fn enter_call() {
    grid_dependency_wait();
    launch_dependents();
}

/// This thread's first index of a grid-stride loop in which consecutive
/// warps belong to different blocks, so a call that needs only a few warps
/// spreads them over many SMs (each SM's stores to peers are the limit).
/// With a fixed grid, an index always lands in the same block, which the
/// per-block flags rely on. Blocks must be whole warps.
#[symm_kernel(device)]
pub(crate) fn spread_first() -> u32 {
    let t = thread_idx_x();
    ((t / 32) * grid_dim_x() + block_idx_x()) * 32 + t % 32
}

/// The start of a barrier kernel (the collectives' pull kernels and the
/// fused all-reduce + RMSNorm; the all-reduce's call
/// [`enter_barrier_sending`] on their own control allocation), after
/// [`enter_call`]: this call's number ([`call_begin`] on channel `ch` of
/// `buf`) once the entry barrier passed, with the call's identity `sig` (a
/// digest of its kind, element type, sizes, op and root) sent to every peer
/// on channel `ch + 1` (the collectives and the all-reduce each reserve at least two
/// adjacent channels) after the barrier's flag ([`enter_barrier_sending`]),
/// so it costs no round trip of its own. [`exit_checked`] compares it.
#[symm_kernel(device)]
pub(crate) fn enter_sending<T: Scalar>(buf: SymmBuf<T>, ch: u32, sig: u32) -> u32 {
    let call = call_begin(buf, ch);
    enter_barrier_sending(buf, ch, call, ch + 1u32, sig);
    call
}

/// The exit barrier of a kernel begun with [`enter_sending`]: fails the call
/// if a peer sent another call's identity. A peer in another call may have
/// had this one read its other buffer, or write a peer's scratch (in
/// bounds: every allocation has the same size on every rank, and the
/// kernel reads and writes where its own checked arguments point, or, for
/// the all-to-all-v, where splits checked against its own input length
/// and output capacity point), so what it computed is never returned.
#[symm_kernel(device)]
pub(crate) fn exit_checked<T: Scalar>(buf: SymmBuf<T>, ch: u32, call: u32, sig: u32) {
    let same = exit_barrier_checking(buf, ch, call, ch + 1u32, sig);
    kernel_assert!(
        same,
        "the ranks made different calls (kind, buffer, element type, sizes, op, root or ranges differ); every rank must make the same collective calls in the same order"
    );
}

/// `acc` plus elements `i..i + V` of ranks 8, 9, …, `world - 1`'s `buf`,
/// in rank order, 8 ranks' loads issued at a time: the sums of a domain of
/// more than 8 ranks carried on past the unrolled 8. Nothing up to 8 ranks.
#[symm_kernel(device)]
pub(crate) fn add_ranks_past_8<T: Scalar, const V: usize>(
    buf: SymmBuf<T>,
    i: u32,
    world: u32,
    acc: [f32; V],
) -> [f32; V] {
    let mut sums = acc;
    let mut base = 8u32;
    while base < world {
        let zero: [T; V] = [T::from_f32(0.0f32); V];
        let mut vals: [[T; V]; 8] = [zero; 8];
        for r in 0..8u32 {
            if base + r < world {
                vals[r] = buf.peer(base + r).load_vec::<V>(i);
            }
        }
        for r in 0..8u32 {
            if base + r < world {
                for k in 0..V {
                    sums[k] += vals[r][k].to_f32();
                }
            }
        }
        base += 8u32;
    }
    sums
}

#[cfg(test)]
mod tests {
    /// A built-in identity check's failure reports `ErrorKind::Mismatch`
    /// only while its `kernel_assert!` message contains
    /// `symm::MISMATCH_ASSERT`: every assertion that speaks of the ranks'
    /// different calls must say it in those words.
    #[test]
    fn identity_checks_say_the_mismatch_phrase() {
        let files = [
            ("shared/device.rs", include_str!("device.rs")),
            (
                "collectives/device/ll.rs",
                include_str!("../collectives/device/ll.rs"),
            ),
            (
                "all_reduce/device.rs",
                include_str!("../all_reduce/device.rs"),
            ),
            (
                "collectives/device/mod.rs",
                include_str!("../collectives/device/mod.rs"),
            ),
            ("p2p/device.rs", include_str!("../p2p/device.rs")),
        ];
        for (name, src) in files {
            let mut found = 0;
            for (at, _) in src.match_indices("kernel_assert!(") {
                let end = src[at..].find(");").map_or(src.len(), |e| at + e);
                let call = &src[at..end];
                if call.contains("different calls") {
                    found += 1;
                    assert!(call.contains(symm::MISMATCH_ASSERT), "{name}: {call}");
                }
            }
            assert!(found > 0, "{name}: no identity check found");
        }
    }
}
