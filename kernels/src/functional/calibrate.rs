//! The crossovers across NVLink domains, measured on the group itself:
//! for each collective with a hierarchical form, the smallest message
//! from which that form beats flat NCCL over the whole group
//! ([`Options::min_hier_bytes`]), and the size from which the all-gather
//! and reduce-scatter send only each rank's share across domains
//! ([`Options::reorder_min_bytes`]).
//!
//! They depend on the network between the domains (InfiniBand, RoCE,
//! sockets), the domains' size and NCCL's own tuning, so they are
//! measured where the job runs rather than fixed here: each form is timed
//! on the group at sizes from 1 KiB up, every rank's times are exchanged
//! through the group's store and the slowest rank's kept, so every rank
//! derives the same thresholds from the same table. The emulator measures
//! too (its times are the emulator's, for tests of the mechanism).

use super::*;
use std::fmt;
use std::time::Instant;

/// How [`Collectives::calibrate`] measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrateOptions {
    min_bytes: usize,
    max_bytes: usize,
    iters: usize,
    trials: usize,
}

impl Default for CalibrateOptions {
    /// 1 KiB to 64 MiB in powers of 4, 3 trials of 8 back-to-back calls.
    fn default() -> Self {
        CalibrateOptions {
            min_bytes: 1 << 10,
            max_bytes: 64 << 20,
            iters: 8,
            trials: 3,
        }
    }
}

impl CalibrateOptions {
    /// The smallest and largest messages timed (bytes of each rank's
    /// input, in powers of 4 from `min`).
    pub fn with_sizes(mut self, min: usize, max: usize) -> Self {
        (self.min_bytes, self.max_bytes) = (min.max(1), max);
        self
    }

    /// Calls per timing (back to back, then one wait) and timings per size
    /// (the median is kept).
    pub fn with_repeats(mut self, iters: usize, trials: usize) -> Self {
        (self.iters, self.trials) = (iters.max(1), trials.max(1));
        self
    }

    fn sizes(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(self.min_bytes), |&b| b.checked_mul(4))
            .take_while(|&b| b <= self.max_bytes)
    }
}

/// One collective at one size: the slowest rank's median µs per call in
/// each form.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    /// The collective.
    pub collective: Collective,
    /// Bytes of each rank's input ([`CallFacts::bytes`]).
    pub bytes: usize,
    /// The hierarchical form (the all-gather's and reduce-scatter's form
    /// without the reordering copy).
    pub hier_us: f64,
    /// The all-gather's and reduce-scatter's form that sends only each
    /// rank's share across domains, reordering on the device.
    pub reorder_us: Option<f64>,
    /// Flat NCCL over the whole group; `None` where NCCL cannot run it
    /// (ranks sharing a GPU).
    pub flat_us: Option<f64>,
}

impl Timed {
    /// The faster hierarchical form's time.
    pub fn best_hier_us(&self) -> f64 {
        self.reorder_us
            .map_or(self.hier_us, |r| r.min(self.hier_us))
    }
}

/// What [`Collectives::calibrate`] measured, and the options it makes of
/// it: the same on every rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    options: Options,
    rows: Vec<Timed>,
    notes: Vec<String>,
}

impl Calibration {
    /// The group's options with the measured thresholds: make a
    /// [`Collectives`] with them ([`Collectives::with_options`], on every
    /// rank) to take the forms this machine runs faster.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Every timing, by collective and size.
    pub fn rows(&self) -> &[Timed] {
        &self.rows
    }

    /// What was not measured, and why (a collective without a
    /// hierarchical form on this group, NCCL that cannot run here), one
    /// line each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The thresholds as [`ENV_MIN_HIER_BYTES`](rule::ENV_MIN_HIER_BYTES)
    /// spells them, for later jobs on the same machines
    /// (`all_reduce=64K,...,reorder=1M`).
    pub fn setting(&self) -> String {
        let mut items: Vec<String> = MEASURED
            .iter()
            .map(|&c| format!("{c}={}", size_setting(self.options.min_hier_bytes(c))))
            .collect();
        items.push(format!(
            "reorder={}",
            size_setting(self.options.reorder_min_bytes())
        ));
        items.join(",")
    }
}

impl fmt::Display for Calibration {
    /// A markdown table of the timings, the thresholds and the notes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |t: Option<f64>| t.map_or("-".to_string(), |t| format!("{t:.1}"));
        writeln!(
            f,
            "| call | bytes | hierarchical µs | reordering µs | flat NCCL µs |"
        )?;
        writeln!(f, "|---|---|---|---|---|")?;
        for r in &self.rows {
            writeln!(
                f,
                "| {} | {} | {:.1} | {} | {} |",
                r.collective,
                rule::size_name(r.bytes),
                r.hier_us,
                us(r.reorder_us),
                us(r.flat_us)
            )?;
        }
        writeln!(f, "\n{}={}", rule::ENV_MIN_HIER_BYTES, self.setting())?;
        for n in &self.notes {
            writeln!(f, "- {n}")?;
        }
        Ok(())
    }
}

/// A size as the threshold lists take it (`never`: no message reaches it).
fn size_setting(b: usize) -> String {
    match b {
        usize::MAX => "never".to_string(),
        b => rule::size_name(b)
            .replace(" KiB", "K")
            .replace(" MiB", "M")
            .replace(" B", ""),
    }
}

/// The collectives whose crossovers are measured (the coalesced
/// all-reduce takes the all-reduce's).
const MEASURED: [Collective; 6] = [
    Collective::AllReduce,
    Collective::AllReduceCoalesced,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::Broadcast,
    Collective::AllToAll,
];

/// The smallest size from which `fast` is no slower than `slow` at that
/// and every larger measured size, from `(bytes, fast µs, slow µs)` rows
/// in increasing size: 0 where it wins everywhere (so also below the
/// smallest size measured), `usize::MAX` where it loses at the largest.
pub fn crossover(rows: &[(usize, f64, f64)]) -> usize {
    let mut from = usize::MAX;
    for &(bytes, fast, slow) in rows.iter().rev() {
        if fast > slow {
            break;
        }
        from = bytes;
    }
    match rows.first() {
        Some(&(first, ..)) if from == first => 0,
        _ => from,
    }
}

impl Collectives {
    /// Measures where each collective's hierarchical form beats flat NCCL
    /// on this group ([`Options::min_hier_bytes`]), and where the
    /// all-gather and reduce-scatter gain from reordering
    /// ([`Options::reorder_min_bytes`]), and gives the options that take
    /// the faster form at each size. Collective: every rank calls it at
    /// the same point, with the same `how`; it runs each form many times
    /// on buffers of its own (up to `how`'s largest size times the world
    /// size), so call it once, at start-up, and reuse
    /// [`Calibration::setting`] in later jobs.
    ///
    /// On a group that does not span NVLink domains, or whose domains
    /// hold one rank each on GPUs (the hierarchy is then NCCL alone), it
    /// measures nothing and says so in [`Calibration::notes`].
    pub fn calibrate(&self, how: &CalibrateOptions) -> Result<Calibration> {
        // Counted first, so that the ranks' store keys stay in step
        // whatever happens below.
        let k = self
            .user
            .extension(|_: &Calibrations| true, |_| Ok(Calibrations::default()))?
            .0
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if how.min_bytes > how.max_bytes {
            return Err(invalid(
                &self.user,
                format!(
                    "calibrate: the smallest size ({}) is past the largest ({})",
                    rule::size_name(how.min_bytes),
                    rule::size_name(how.max_bytes)
                ),
            ));
        }
        // A rank that fails here would leave its peers waiting in a
        // collective or the store: they hear of it at once.
        self.calibrate_at(how, k)
            .inspect_err(|e| self.user.abort_with(e))
    }

    /// [`calibrate`](Self::calibrate), its exchange numbered `k`.
    fn calibrate_at(&self, how: &CalibrateOptions, k: u64) -> Result<Calibration> {
        let mut notes = Vec::new();
        let mut options = self.options.clone();
        let calls: Vec<Collective> = [
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
            Collective::Broadcast,
            Collective::AllToAll,
        ]
        .into_iter()
        .filter(|&c| {
            let has = self.has_hierarchy(c, true);
            if !has && self.hierarchy_applies() {
                notes.push(format!(
                    "{c}: not measured, no hierarchical form on this group (the deterministic \
                     mode's exact form, or domains that are not blocks of consecutive ranks)"
                ));
            }
            has
        })
        .collect();
        if calls.is_empty() {
            if !self.hierarchy_applies() {
                notes.push(
                    "nothing measured: the group spans no NVLink domains, or each holds one \
                     rank on GPUs (the hierarchy is then NCCL alone), or the options force \
                     a backend"
                        .to_string(),
                );
            }
            return Ok(Calibration {
                options,
                rows: Vec::new(),
                notes,
            });
        }
        let world = self.cs.world_size();
        let reorders =
            |c: Collective| matches!(c, Collective::AllGather | Collective::ReduceScatter);
        // Each form on collectives of its own, made alike on every rank.
        let base = self.options.clone();
        let hier = Collective::ALL
            .into_iter()
            .fold(base.clone(), |o, c| o.with_min_hier_bytes(c, 0));
        let direct = Collectives::made(
            &self.user,
            hier.clone().with_reorder_min_bytes(usize::MAX),
            false,
        )?;
        let reorder = match calls.iter().any(|&c| reorders(c)) {
            true => Some(Collectives::made(
                &self.user,
                hier.with_reorder_min_bytes(0),
                false,
            )?),
            false => None,
        };
        let flat = Collectives::made(&self.user, base.with_backend(Prefer::Nccl), false)?;
        let mut rows = Vec::new();
        for &call in &calls {
            for bytes in how.sizes() {
                // `bytes` of input on every rank (of the whole message: the
                // all-gather's input is its share).
                let n = match call {
                    Collective::ReduceScatter | Collective::AllToAll => bytes / 4 / world * world,
                    _ => bytes / 4,
                };
                if n == 0 {
                    continue;
                }
                let out_n = match call {
                    Collective::AllGather => n * world,
                    Collective::ReduceScatter => n / world,
                    _ => n,
                };
                let x = self.user.device_buffer_from(&vec![1f32; n])?;
                let mut y = self.user.device_buffer::<f32>(out_n)?;
                // The size as the call's facts weigh it (`hier_bytes`).
                let weighed = match call {
                    Collective::ReduceScatter => n / world * 4,
                    _ => n * 4,
                };
                let facts = CallFacts {
                    collective: call,
                    dtype: symm::DType::F32,
                    op: matches!(call, Collective::AllReduce | Collective::ReduceScatter)
                        .then_some(ReduceOp::Sum),
                    bytes: weighed,
                    bytes_per_peer: weighed,
                    nccl_shape: None,
                    placed: Placed::Plain,
                };
                let flat_runs = rule::route(&flat.options, &flat.group, &facts).is_ok();
                let hier_us = time(&direct, how, call, &x, &mut y)?;
                let reorder_us = match (&reorder, reorders(call)) {
                    (Some(r), true) => Some(time(r, how, call, &x, &mut y)?),
                    _ => None,
                };
                let flat_us = match flat_runs {
                    true => Some(time(&flat, how, call, &x, &mut y)?),
                    false => None,
                };
                rows.push(Timed {
                    collective: call,
                    bytes: weighed,
                    hier_us,
                    reorder_us,
                    flat_us,
                });
            }
        }
        self.slowest(&mut rows, k)?;
        // The whole message's bytes of a row (the all-gather's output, the
        // reduce-scatter's input), as the reordering size counts them.
        let whole = |r: &Timed| match r.collective {
            Collective::AllGather | Collective::ReduceScatter => r.bytes * world,
            _ => r.bytes,
        };
        // The reordering size first (one for both: where each of them gains
        // from reordering), so that the crossover with flat NCCL weighs the
        // form that runs at each size.
        let reorder_from = calls
            .iter()
            .filter(|&&c| reorders(c))
            .filter_map(|&call| {
                let mine: Vec<(usize, f64, f64)> = rows
                    .iter()
                    .filter(|r| r.collective == call)
                    .filter_map(|r| Some((whole(r), r.reorder_us?, r.hier_us)))
                    .collect();
                (!mine.is_empty()).then(|| crossover(&mine))
            })
            .max();
        if let Some(r) = reorder_from {
            options = options.with_reorder_min_bytes(r);
        }
        let reorder_min = options.reorder_min_bytes();
        let runs = |r: &Timed| match r.reorder_us {
            Some(t) if whole(r) >= reorder_min => t,
            _ => r.hier_us,
        };
        for &call in &calls {
            let mine: Vec<&Timed> = rows.iter().filter(|r| r.collective == call).collect();
            let from = if mine.is_empty() {
                notes.push(format!(
                    "{call}: no size of {} to {} fits the world, not measured",
                    rule::size_name(how.min_bytes),
                    rule::size_name(how.max_bytes)
                ));
                continue;
            } else if mine.iter().any(|r| r.flat_us.is_none()) {
                notes.push(format!(
                    "{call}: flat NCCL cannot run on this group ({}), so it is \
                     hierarchical at every size",
                    flat.group.no_nccl.as_deref().unwrap_or("refused")
                ));
                0
            } else {
                crossover(
                    &mine
                        .iter()
                        .map(|r| (r.bytes, runs(r), r.flat_us.unwrap_or(f64::INFINITY)))
                        .collect::<Vec<_>>(),
                )
            };
            options = options.with_min_hier_bytes(call, from);
            if call == Collective::AllReduce {
                options = options.with_min_hier_bytes(Collective::AllReduceCoalesced, from);
            }
        }
        Ok(Calibration {
            options,
            rows,
            notes,
        })
    }

    /// Every rank's timings exchanged through the store, each replaced by
    /// the slowest rank's, so that every rank derives the same thresholds.
    fn slowest(&self, rows: &mut [Timed], k: u64) -> Result<()> {
        let comm = &self.user;
        let key = |r: usize| {
            comm.store_key(&format!(
                "symm_kernels/functional/{}/calibrate/{k}/{r}",
                self.seq
            ))
        };
        let flat = |rows: &[Timed]| -> Vec<f64> {
            rows.iter()
                .flat_map(|r| [Some(r.hier_us), r.reorder_us, r.flat_us])
                .map(|t| t.unwrap_or(-1.0))
                .collect()
        };
        let mine: Vec<u8> = flat(rows).iter().flat_map(|t| t.to_le_bytes()).collect();
        let store_err = |source| comm.store_error(source);
        comm.store()
            .set(&key(comm.rank()), &mine)
            .map_err(store_err)?;
        let mut worst = flat(rows);
        for r in 0..comm.world_size() {
            let v = comm
                .store()
                .get(&key(r), comm.options().timeout)
                .map_err(store_err)?;
            if v.len() != mine.len() {
                return Err(Error::Mismatch {
                    rank: comm.rank(),
                    group: comm.group_name().clone(),
                    message: format!(
                        "calibrate: rank {r} timed {} forms and sizes, this rank {} (every \
                         rank must calibrate with the same options)",
                        v.len() / 8,
                        mine.len() / 8
                    ),
                });
            }
            for (w, b) in worst.iter_mut().zip(v.chunks_exact(8)) {
                let t = f64::from_le_bytes(b.try_into().expect("8 bytes"));
                *w = w.max(t);
            }
        }
        for (r, t) in rows.iter_mut().zip(worst.chunks_exact(3)) {
            let some = |t: f64| (t >= 0.0).then_some(t);
            r.hier_us = t[0];
            r.reorder_us = some(t[1]);
            r.flat_us = some(t[2]);
        }
        Ok(())
    }
}

/// Counts a rank's calibrations (their store keys' sequence).
#[derive(Default)]
struct Calibrations(std::sync::atomic::AtomicU64);

/// The median µs per call of `call` on `fc`, from `x` into `y`: each
/// timing `how.iters` calls back to back and one wait, after a host
/// barrier and two calls untimed.
fn time(
    fc: &Collectives,
    how: &CalibrateOptions,
    call: Collective,
    x: &symm::DeviceBuffer<f32>,
    y: &mut symm::DeviceBuffer<f32>,
) -> Result<f64> {
    let mut one = || -> Result<()> {
        match call {
            Collective::AllReduce => fc.all_reduce(x, &mut *y, ReduceOp::Sum)?.wait().map(drop),
            Collective::AllGather => fc.all_gather(x, &mut *y)?.wait().map(drop),
            Collective::ReduceScatter => fc
                .reduce_scatter(x, &mut *y, ReduceOp::Sum)?
                .wait()
                .map(drop),
            Collective::AllToAll => fc.all_to_all(x, &mut *y)?.wait().map(drop),
            _ => fc.broadcast(x, &mut *y, 0)?.wait().map(drop),
        }
    };
    one()?;
    one()?;
    fc.synchronize()?;
    fc.user.synchronize()?;
    let mut times = Vec::with_capacity(how.trials);
    for _ in 0..how.trials {
        fc.user.host_barrier()?;
        let t = Instant::now();
        for _ in 0..how.iters {
            one()?;
        }
        fc.synchronize()?;
        fc.user.synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e6 / how.iters as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
