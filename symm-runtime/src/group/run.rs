//! Running a group: [`run`] and [`run_local`] start one thread per rank
//! (GPU or emulated) and collect every rank's result or error.

use std::fmt;
use std::sync::Arc;

use crate::backend::{CudaBackend, Sharing};
use crate::comm::{check_world, Comm, CommOptions};
use crate::error::{Error, Result};
use crate::layout::MAX_DOMAIN_SIZE;
use crate::store::{InProcessStore, Store};

/// Where [`run`] puts its ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ranks {
    /// One rank per listed CUDA device, in order. A device may be listed
    /// more than once: those ranks share it, each with its own stream,
    /// memory and signal pads (the kernels that wait on peers must then fit
    /// on the GPU together; see [`Comm::co_resident_blocks`]).
    Cuda(Vec<usize>),
    /// This many simulated ranks on the CPU emulator.
    Emulator(usize),
}

impl Ranks {
    /// Every local GPU when there are any, otherwise `emulated` simulated ranks.
    pub fn auto(emulated: usize) -> Ranks {
        match crate::cuda::cuda_device_count().min(MAX_DOMAIN_SIZE) {
            0 => Ranks::Emulator(emulated),
            n => Ranks::Cuda((0..n).collect()),
        }
    }

    /// `world` GPU ranks on the first `gpus` devices, `per_gpu` consecutive
    /// ranks on each (rank r on device r / per_gpu), or `None` when that
    /// needs more than `gpus` devices. `per_gpu` of `None` takes as few per
    /// device as the devices allow. `cuda_packed(4, 1, None)` is
    /// `Ranks::Cuda(vec![0, 0, 0, 0])`.
    pub fn cuda_packed(world: usize, gpus: usize, per_gpu: Option<usize>) -> Option<Ranks> {
        let per_gpu = match per_gpu {
            Some(0) => return None,
            Some(k) => k,
            None => world.div_ceil(gpus.max(1)).max(1),
        };
        if world.div_ceil(per_gpu) > gpus {
            return None;
        }
        Some(Ranks::Cuda((0..world).map(|r| r / per_gpu).collect()))
    }

    /// `world` ranks on this machine's GPUs: one per GPU while there are
    /// enough, otherwise as few per GPU as fit (rank r on GPU r / k), or
    /// exactly `SYMM_RANKS_PER_GPU` consecutive ranks per GPU when that is
    /// set. `None` when the ranks need more GPUs than there are (or
    /// `SYMM_RANKS_PER_GPU` is not a positive number). Ranks that share a GPU
    /// prove correctness, not speed: their kernels compete for its SMs.
    /// Ranks that share a GPU need more of the driver's hardware work queues
    /// than it gives by default: see [`prepare_shared_gpus`](crate::prepare_shared_gpus).
    pub fn gpus(world: usize) -> Option<Ranks> {
        let per_gpu = Ranks::ranks_per_gpu().ok()?;
        Ranks::cuda_packed(world, crate::cuda::cuda_device_count(), per_gpu)
    }

    /// `SYMM_RANKS_PER_GPU` as [`Ranks::gpus`] reads it: `None` when unset,
    /// or why it is not a positive number.
    pub fn ranks_per_gpu() -> std::result::Result<Option<usize>, String> {
        match std::env::var("SYMM_RANKS_PER_GPU") {
            Err(_) => Ok(None),
            Ok(v) => match v.trim().parse::<usize>() {
                Ok(k) if k > 0 => Ok(Some(k)),
                _ => Err(format!("SYMM_RANKS_PER_GPU={v:?} is not a positive number")),
            },
        }
    }

    /// Whether two ranks run on one GPU.
    pub fn shares_a_gpu(&self) -> bool {
        match self {
            Ranks::Cuda(d) => d.iter().enumerate().any(|(i, x)| d[..i].contains(x)),
            Ranks::Emulator(_) => false,
        }
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        match self {
            Ranks::Cuda(d) => d.len(),
            Ranks::Emulator(n) => *n,
        }
    }

    /// One line saying where the ranks run, for a program's first line of
    /// output: `CUDA, 2 GPU rank(s) on devices [0, 1]`, or `CPU emulator, 4
    /// simulated ranks (no CUDA device found)`.
    pub fn describe(&self) -> String {
        match self {
            Ranks::Cuda(d) => {
                let mut devices = d.clone();
                devices.sort_unstable();
                devices.dedup();
                let counts: Vec<usize> = devices
                    .iter()
                    .map(|x| d.iter().filter(|y| *y == x).count())
                    .collect();
                let most = counts.iter().copied().max().unwrap_or(0);
                let shared = if most > 1 {
                    format!(
                        " ({} of {} GPU(s) shared, up to {most} ranks on one: a correctness \
                         run, not a timing)",
                        counts.iter().filter(|&&c| c > 1).count(),
                        devices.len()
                    )
                } else {
                    String::new()
                };
                format!("CUDA, {} GPU rank(s) on devices {d:?}{shared}", d.len())
            }
            Ranks::Emulator(n) if !crate::cuda::cuda_available() => {
                format!("CPU emulator, {n} simulated ranks (no CUDA device found)")
            }
            Ranks::Emulator(n) => format!("CPU emulator, {n} simulated ranks"),
        }
    }
}

/// Every failed rank's error from [`run`] or [`run_local`].
#[derive(Debug)]
pub struct RunError {
    /// `(rank, error)` for each rank that failed, in rank order.
    pub errors: Vec<(usize, Error)>,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rank(s) failed", self.errors.len())?;
        for (r, e) in &self.errors {
            // Most errors name their rank already; say it once.
            let msg = e.to_string();
            if msg.starts_with(&format!("rank {r}:")) || msg.starts_with(&format!("rank {r} ")) {
                write!(f, "\n  {msg}")?;
            } else {
                write!(f, "\n  rank {r}: {msg}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for RunError {}

/// Runs `f` once per rank, one thread per rank, and joins them all.
///
/// Returns every rank's result in rank order, or every failed rank's error
/// (a panic is reported as [`Error::RankPanicked`]). A rank that fails
/// (returns an error or panics) or returns early does not hang the others:
/// its error reaches them at once ([`Comm::abort`]), and their pending and
/// later group operations fail with [`Error::PeerFailed`] naming it (a GPU
/// rank that fails before its `Comm` exists: their joining the group times
/// out naming it). GPU ranks first wait for each other's device setup (which takes
/// turns in one process), so that `CommOptions::timeout` counts from when
/// every device is ready, not from the first. `Ranks::Cuda` may list a GPU more than once: those ranks share it
/// (see [`prepare_shared_gpus`](crate::prepare_shared_gpus) and the book's
/// launching chapter).
pub fn run<R, F>(ranks: Ranks, options: CommOptions, f: F) -> Result<Vec<R>, RunError>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    let world = ranks.world_size();
    if let Err(e) = check_world(0, world) {
        return Err(RunError {
            errors: vec![(0, e)],
        });
    }
    let store: Arc<dyn Store> = Arc::new(InProcessStore::new());
    // Every GPU rank's device is set up before any rank starts its join's
    // clock: one process's context creations take turns (3 s in all for 4
    // H100s), which would otherwise use up a short timeout and blame ranks
    // that are merely slow to start. The gate's own limit only bounds a
    // setup that never returns.
    let devices_ready = SetupGate::new(world, options.timeout.max(SETUP_LIMIT));
    let outcomes: Vec<Result<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (store, options, ranks, f) = (store.clone(), options.clone(), &ranks, &f);
                let devices_ready = &devices_ready;
                let spawned = std::thread::Builder::new()
                    .name(format!("symm-rank-{rank}"))
                    .spawn_scoped(s, move || {
                        let comm = match ranks {
                            Ranks::Cuda(devs) => {
                                // Caught so that a panicking rank still
                                // reaches the gate (no hang), then
                                // resumed as its own panic.
                                let backend =
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        CudaBackend::new(rank, devs[rank], Sharing::InProcess)
                                    }));
                                devices_ready.arrive_and_wait();
                                let backend = match backend {
                                    Ok(backend) => Arc::new(backend?),
                                    Err(panic) => std::panic::resume_unwind(panic),
                                };
                                Comm::with_backend(rank, world, store, options, backend)?
                            }
                            Ranks::Emulator(_) => Comm::emulated(rank, world, store, options)?,
                        };
                        let _finished = matches!(ranks, Ranks::Emulator(_)).then(|| {
                            crate::emulator::FinishGuard(comm.group_key().state.clone(), rank)
                        });
                        // A rank that fails tells its peers at once, so
                        // their waits end now and not at their timeouts
                        // (unless a peer left first: then its error is
                        // likely this one's cause, and the peer's word
                        // stands).
                        let r = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            f(&comm)
                        })) {
                            Ok(r) => r,
                            Err(panic) => {
                                if comm.peer_down().is_none() {
                                    let msg = panic_message(&*panic);
                                    comm.abort_as(
                                        Some(crate::ErrorKind::Panicked),
                                        &format_args!("panicked: {msg}"),
                                    );
                                }
                                std::panic::resume_unwind(panic)
                            }
                        };
                        if let Err(e) = &r {
                            if comm.peer_down().is_none() {
                                comm.abort_with(e);
                            }
                        }
                        r
                    });
                if spawned.is_err() && matches!(ranks, Ranks::Cuda(_)) {
                    // Its thread will never arrive: the others need not wait
                    // for it (their join names it).
                    devices_ready.arrive();
                }
                spawned
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| match h {
                Err(e) => Err(Error::RankPanicked {
                    rank,
                    message: format!("could not spawn its thread: {e}"),
                }),
                Ok(h) => h.join().unwrap_or_else(|p| {
                    Err(Error::RankPanicked {
                        rank,
                        message: panic_message(&*p),
                    })
                }),
            })
            .collect()
    });
    let mut ok = Vec::with_capacity(world);
    let mut errors = Vec::new();
    for (rank, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok(v) => ok.push(v),
            Err(e) => errors.push((rank, e)),
        }
    }
    if errors.is_empty() {
        Ok(ok)
    } else {
        Err(RunError { errors })
    }
}

/// The least time [`run`]'s GPU ranks wait for each other's device setup
/// before they join anyway: context creation takes turns in one process,
/// about 0.75 s a GPU.
const SETUP_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Where a process's ranks wait for each other's device setup: every rank
/// arrives once, and waits until all have or `limit` passes. Bounded, so a
/// setup that never returns does not hold the other ranks: they go on to
/// the join, which names its rank (`run` still waits for that thread).
struct SetupGate {
    arrived: std::sync::Mutex<usize>,
    all: std::sync::Condvar,
    world: usize,
    limit: std::time::Duration,
}

impl SetupGate {
    fn new(world: usize, limit: std::time::Duration) -> SetupGate {
        SetupGate {
            arrived: std::sync::Mutex::new(0),
            all: std::sync::Condvar::new(),
            world,
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.arrived.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one rank as set up, without waiting.
    fn arrive(&self) {
        *self.lock() += 1;
        self.all.notify_all();
    }

    fn arrive_and_wait(&self) {
        let mut arrived = self.lock();
        *arrived += 1;
        self.all.notify_all();
        let _ = self
            .all
            .wait_timeout_while(arrived, self.limit, |n| *n < self.world);
    }
}

/// [`run`] with one rank per listed CUDA device and default options.
pub fn run_local<R, F>(devices: &[usize], f: F) -> Result<Vec<R>, RunError>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    run(Ranks::Cuda(devices.to_vec()), CommOptions::default(), f)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

#[cfg(test)]
mod tests {
    use super::{Ranks, SetupGate};
    use std::time::{Duration, Instant};

    #[test]
    fn the_setup_gate_opens_when_all_arrive_and_never_hangs() {
        // Three arrivals of three: nobody waits for the limit.
        let gate = SetupGate::new(3, Duration::from_secs(30));
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| gate.arrive_and_wait());
            }
        });
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // One arrival of two (a rank whose thread never started): it waits
        // out the limit, then goes on.
        let gate = SetupGate::new(2, Duration::from_millis(200));
        let t = Instant::now();
        gate.arrive_and_wait();
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(10),
            "{took:?}"
        );
    }

    #[test]
    fn packed_placements_share_gpus_only_when_asked_or_needed() {
        let cuda = |v: &[usize]| Some(Ranks::Cuda(v.to_vec()));
        // Enough GPUs: one rank each.
        assert_eq!(Ranks::cuda_packed(4, 8, None), cuda(&[0, 1, 2, 3]));
        // Too few: as few per GPU as fit, in consecutive runs.
        assert_eq!(Ranks::cuda_packed(4, 1, None), cuda(&[0, 0, 0, 0]));
        assert_eq!(Ranks::cuda_packed(3, 2, None), cuda(&[0, 0, 1]));
        assert_eq!(
            Ranks::cuda_packed(8, 3, None),
            cuda(&[0, 0, 0, 1, 1, 1, 2, 2])
        );
        // Asked for: k per GPU, even when more GPUs are there.
        assert_eq!(Ranks::cuda_packed(4, 4, Some(2)), cuda(&[0, 0, 1, 1]));
        assert_eq!(Ranks::cuda_packed(1, 1, Some(4)), cuda(&[0]));
        // Impossible placements.
        assert_eq!(Ranks::cuda_packed(4, 1, Some(2)), None);
        assert_eq!(Ranks::cuda_packed(2, 0, None), None);
        assert_eq!(Ranks::cuda_packed(2, 2, Some(0)), None);
    }

    #[test]
    fn ranks_per_gpu_must_be_a_positive_number() {
        // No other test of this binary reads the variable.
        std::env::remove_var("SYMM_RANKS_PER_GPU");
        assert_eq!(Ranks::ranks_per_gpu(), Ok(None));
        std::env::set_var("SYMM_RANKS_PER_GPU", " 4 ");
        assert_eq!(Ranks::ranks_per_gpu(), Ok(Some(4)));
        for bad in ["0", "four", "-1"] {
            std::env::set_var("SYMM_RANKS_PER_GPU", bad);
            let e = Ranks::ranks_per_gpu().unwrap_err();
            assert!(e.contains("is not a positive number"), "{e}");
        }
        std::env::remove_var("SYMM_RANKS_PER_GPU");
    }

    #[test]
    fn shared_placements_say_so() {
        let d = Ranks::Cuda(vec![0, 0, 1]).describe();
        assert!(d.contains("devices [0, 0, 1]"), "{d}");
        assert!(
            d.contains("1 of 2 GPU(s) shared, up to 2 ranks on one"),
            "{d}"
        );
        assert!(!Ranks::Cuda(vec![0, 1]).describe().contains("shared"));
    }
}
