//! The all-reduce's launch: each path's grid (fixed for the kernels whose
//! per-block epochs must stay in step, fitted to a GPU that ranks share)
//! and its staging family.

use symm::{Comm, DeviceSlice, LaunchConfig, Result, SymmetricMemory};

use super::elem::AllReduceElem;
use super::plan::{
    config, AllReducePath, LAMPORT_MANY_GRID, LL_BLOCKS, LL_SMALL_BYTES, LL_SMALL_GRID,
    LTS_SMALL_THREADS, PUSH_BLOCKS, THREADS,
};
use super::staging::{control, staging};
use crate::shared::elem::{packet, vector};
use crate::shared::grid::{fit_blocks, fixed_grid, threads_for, with_pdl};

/// Launches `path` on checked arguments, `n > 0`, with its staging.
pub(super) fn launch<T: AllReduceElem>(
    path: AllReducePath,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    ch: u32,
    sig: u32,
) -> Result<()> {
    let world = comm.world_size();
    let bytes = n * std::mem::size_of::<T>();
    let fixed = || -> Result<LaunchConfig> {
        let (blocks, threads) = fixed_shape(path, world, bytes);
        let threads = threads_for::<T>(threads);
        let blocks = fit::<T>(comm, path, fixed_grid(comm, blocks), world, bytes)?;
        Ok(with_pdl(comm, LaunchConfig::linear(blocks, threads)))
    };
    match path {
        AllReducePath::Ll => {
            // A packet holds 4 bytes of data; packets travel in pairs.
            let packets = n.div_ceil(packet::<T>());
            let (stage, per_region) =
                staging::<u64, T>(comm, path, bytes, packets.div_ceil(2) * 2)?;
            let cap = (per_region / 2) as u32;
            let cfg = fixed()?;
            // SAFETY: `n` was checked against `input` and `out` (`check`),
            // and `stage` holds `cap` packet pairs per region for it.
            unsafe { T::__launch(path, comm, cfg, input, &stage, out, n as u32, cap, ch, sig) }
        }
        AllReducePath::Push | AllReducePath::Lamport | AllReducePath::LamportTwoShot => {
            // The two-shot's regions hold one chunk of whole vectors (and,
            // as every region of these paths, a 128-byte tail for the call's
            // identity, which `staging` adds).
            let v = vector::<T>();
            let per_region = if path == AllReducePath::LamportTwoShot {
                n.div_ceil(v).div_ceil(world) * v
            } else {
                n
            };
            let (stage, per_region) = staging::<T, T>(comm, path, bytes, per_region)?;
            let cfg = fixed()?;
            // SAFETY: `n` was checked against `input` and `out` (`check`),
            // and `stage` holds `per_region` elements per region for it.
            unsafe {
                T::__launch(
                    path,
                    comm,
                    cfg,
                    input,
                    &stage,
                    out,
                    n as u32,
                    per_region as u32,
                    ch,
                    sig,
                )
            }
        }
        AllReducePath::Pull => {
            let cfg = fitted::<T>(comm, path, config::<T>(n), bytes)?;
            let ctl = control(comm)?;
            // SAFETY: `n` was checked against `input` and `out` (`check`);
            // the pull kernel has no staging (`aux` is its control).
            unsafe { T::__launch(path, comm, cfg, input, &ctl, out, n as u32, 0, ch, sig) }
        }
        AllReducePath::TwoShot => {
            let (scratch, _) = staging::<T, T>(comm, path, bytes, n)?;
            // A thread per vector of one rank's chunk.
            let cfg = fitted::<T>(comm, path, config::<T>(n.div_ceil(world)), bytes)?;
            // SAFETY: `n` was checked against `input` and `out` (`check`),
            // and `scratch` holds `n` elements.
            unsafe { T::__launch(path, comm, cfg, input, &scratch, out, n as u32, 0, ch, sig) }
        }
    }
}

/// `cfg`, a barrier kernel's grid for this call, shrunk to fit a shared
/// GPU (see [`fit`]), with programmatic dependent launch.
fn fitted<T: AllReduceElem>(
    comm: &Comm,
    path: AllReducePath,
    cfg: LaunchConfig,
    bytes: usize,
) -> Result<LaunchConfig> {
    let blocks = fit::<T>(comm, path, cfg.grid.0, comm.world_size(), bytes)?;
    Ok(with_pdl(comm, LaunchConfig::linear(blocks, cfg.block.0)))
}

/// `blocks`, or fewer where ranks share a GPU: as many as every launch of
/// this call's staging family may use with all ranks' kernels resident at
/// once ([`family_threads`] lists the block sizes to allow for). The result
/// depends only on the family, the element type and the group, so a
/// family's grid stays fixed, and is the same on every rank.
fn fit<T: AllReduceElem>(
    comm: &Comm,
    path: AllReducePath,
    blocks: u32,
    world: usize,
    bytes: usize,
) -> Result<u32> {
    let limits = family_threads(path, world, bytes)
        .iter()
        .map(|&threads| T::__co_resident_grid(path, comm, threads_for::<T>(threads)));
    fit_blocks(comm, &format!("{path:?}"), blocks, limits)
}

/// Every block size that the staging family of a `path` call of `bytes`
/// on `world` ranks launches with ([`fixed_shape`]'s threads; the barrier
/// kernels' [`THREADS`]).
fn family_threads(path: AllReducePath, world: usize, bytes: usize) -> &'static [u32] {
    match path {
        AllReducePath::Ll if bytes <= LL_SMALL_BYTES => &[LL_SMALL_GRID.1],
        AllReducePath::Lamport if world > 2 => &[LAMPORT_MANY_GRID.1],
        AllReducePath::LamportTwoShot if world > 2 => &[LTS_SMALL_THREADS, THREADS],
        _ => &[THREADS],
    }
}

/// (blocks, threads) of a fixed-grid kernel (LL, push, Lamport, Lamport
/// two-shot) for `bytes` on `world` ranks, as measured (`bench/NOTES.md`).
/// The block count depends only on the path, the world size and which
/// staging family the call uses, so the per-block epochs of each staging
/// area stay in step; the Lamport two-shot's threads per block may change.
fn fixed_shape(path: AllReducePath, world: usize, bytes: usize) -> (u32, u32) {
    match path {
        AllReducePath::Ll if bytes <= LL_SMALL_BYTES => LL_SMALL_GRID,
        AllReducePath::Ll => (LL_BLOCKS, THREADS),
        AllReducePath::Lamport if world > 2 => LAMPORT_MANY_GRID,
        // v10: on 4 GPUs 128-thread blocks are 15 % faster at 4 MiB and 512
        // at 16 MiB; on 2 GPUs 512 is faster from 1 MiB.
        AllReducePath::LamportTwoShot if world > 2 && bytes <= 4 << 20 => {
            (PUSH_BLOCKS, LTS_SMALL_THREADS)
        }
        _ => (PUSH_BLOCKS, THREADS),
    }
}

#[cfg(test)]
mod tests {
    use super::{family_threads, fixed_shape, AllReducePath, LL_SMALL_BYTES, THREADS};
    use AllReducePath as P;

    /// On a shared GPU a family's grid is fitted for every block size the
    /// family launches with, so it never changes from call to call: the
    /// list must be the same for every size of one family and hold the
    /// block size of each of its launches.
    #[test]
    fn every_family_is_fitted_for_all_its_block_sizes() {
        for world in 1..=8 {
            for path in AllReducePath::ALL {
                let mut seen: Vec<(bool, &[u32])> = Vec::new();
                for shift in 0..27 {
                    for bytes in [1usize << shift, (1 << shift) + 12] {
                        let family = family_threads(path, world, bytes);
                        let threads = match path {
                            AllReducePath::Pull | AllReducePath::TwoShot => THREADS,
                            _ => fixed_shape(path, world, bytes).1,
                        };
                        assert!(
                            family.contains(&threads),
                            "{path:?} world {world} {bytes} B: {threads} not in {family:?}"
                        );
                        // LL keeps two families, split at LL_SMALL_BYTES.
                        let key = path == AllReducePath::Ll && bytes <= LL_SMALL_BYTES;
                        match seen.iter().find(|(k, _)| *k == key) {
                            Some((_, f)) => assert_eq!(*f, family, "{path:?} world {world}"),
                            None => seen.push((key, family)),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn in_place_never_pulls() {
        assert_eq!(P::choose_for(2, 64 << 20, false), P::Pull);
        assert_eq!(P::choose_for(2, 64 << 20, true), P::TwoShot);
        assert_eq!(P::choose_for(2, 1 << 20, true), P::Lamport);
        assert_eq!(P::choose_for(4, 1 << 10, true), P::Ll);
        for w in 2..=8 {
            for shift in 0..27 {
                assert!(P::choose_for(w, 1 << shift, true).allows_alias());
            }
        }
    }

    #[test]
    fn fixed_grids_follow_the_measurements() {
        assert_eq!(fixed_shape(P::Ll, 4, 1 << 10), (2, 64));
        assert_eq!(fixed_shape(P::Ll, 2, (1 << 10) + 1), (64, 512));
        assert_eq!(fixed_shape(P::Lamport, 2, 1 << 20), (128, 512));
        assert_eq!(fixed_shape(P::Lamport, 3, 4 << 10), (16, 256));
        assert_eq!(fixed_shape(P::LamportTwoShot, 4, 4 << 20), (128, 128));
        assert_eq!(fixed_shape(P::LamportTwoShot, 4, (4 << 20) + 1), (128, 512));
        assert_eq!(fixed_shape(P::LamportTwoShot, 2, 1 << 20), (128, 512));
        assert_eq!(fixed_shape(P::Push, 8, 1 << 10), (128, 512));
    }

    #[test]
    fn dispatch_follows_the_measured_crossovers() {
        use AllReducePath::{Lamport, LamportTwoShot, Ll, Pull, TwoShot};
        // (world, bytes, path): each crossover from both sides.
        let cases = [
            (2, 1024, Ll),
            (2, 64 << 10, Ll),
            (2, (64 << 10) + 1, Lamport),
            (2, 1 << 20, Lamport),
            (2, (1 << 20) + 1, LamportTwoShot),
            (2, 16 << 20, LamportTwoShot),
            (2, (16 << 20) + 1, Pull),
            (4, 16 << 10, Ll),
            (4, (16 << 10) + 1, Lamport),
            (3, 16 << 10, Ll),
            (3, 32 << 10, Lamport),
            (8, 2 << 10, Ll),
            (8, (2 << 10) + 1, Lamport),
            (4, 128 << 10, Lamport),
            (4, (128 << 10) + 1, LamportTwoShot),
            (4, 64 << 20, LamportTwoShot),
            (4, (64 << 20) + 1, TwoShot),
            (8, 1 << 20, LamportTwoShot),
            (3, 256 << 20, TwoShot),
        ];
        for (world, bytes, path) in cases {
            assert_eq!(
                AllReducePath::choose(world, bytes),
                path,
                "{world} ranks, {bytes} bytes"
            );
        }
    }
}
