//! What the benchmarks share (`bench_all_reduce`, `bench_collectives`): the
//! timing method (a CUDA graph of back-to-back calls, replays aligned by a
//! barrier, CUDA events), the message sizes, and NCCL through cudarc with
//! plain buffers and symmetric windows. One method in one place, so that
//! the two programs' numbers compare.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use symm::cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::cudarc::nccl::{result as nccl, sys as nccl_sys};
use symm::functional::nccl_exports;
use symm::signal::Channel;
use symm::{Comm, Error, SymmetricMemory};

/// Calls per graph.
pub(crate) const CALLS: usize = 32;
/// Timed replays of each graph (after two untimed ones).
pub(crate) const REPLAYS: usize = 9;
/// Every wait's timeout.
pub(crate) const T: Duration = Duration::from_secs(60);
/// `--lead-in`: untimed calls in each graph before the timed ones.
pub(crate) static LEAD_IN: OnceLock<usize> = OnceLock::new();

/// 1 KiB to 1 GiB in powers of 4, up to `max` bytes.
pub(crate) fn sizes(max: usize) -> Vec<usize> {
    (0..11)
        .map(|k| 1024usize << (2 * k))
        .filter(|&b| b <= max)
        .collect()
}

/// The line that says how every number was timed (the A/B script compares
/// it between two builds).
pub(crate) fn method_line() -> String {
    let lead_in = *LEAD_IN.get().unwrap_or(&0);
    format!(
        "method: CUDA graph of {CALLS} back-to-back calls{}, median of {REPLAYS} replays",
        if lead_in > 0 {
            format!(" after {lead_in} untimed ones in the same graph, timed inside it")
        } else {
            ", timed around the replay".into()
        }
    )
}

pub(crate) fn drv<'a>(
    c: &'a Comm,
    op: &'static str,
) -> impl Fn(symm::cudarc::driver::DriverError) -> Error + 'a {
    move |source| c.driver_error(op, source)
}

pub(crate) fn other(c: &Comm, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        rank: c.rank(),
        group: c.group_name().clone(),
        message: what.to_string(),
    }
}

/// The host barrier that aligns the ranks before each replay: a channel
/// (requested once: a group has few) and the buffer whose pads it uses;
/// on a group that spans NVLink domains (which maps no memory across
/// them), the group's store.
pub(crate) struct Barrier {
    sync: Option<(Arc<SymmetricMemory>, Channel)>,
    comm: Comm,
}

impl Barrier {
    /// Requests the channel with the rank's next `Channel::request`.
    pub(crate) fn new(c: &Comm) -> symm::Result<Barrier> {
        let sync = match c.topology().spans_domains() {
            true => None,
            false => {
                let channel = Channel::request(c)?;
                Some((c.alloc::<u8>(1)?.rendezvous()?, channel))
            }
        };
        Ok(Barrier {
            sync,
            comm: c.clone(),
        })
    }

    fn wait(&self) -> symm::Result<()> {
        match &self.sync {
            Some((sync, channel)) => sync.barrier(channel, T),
            None => self.comm.host_barrier(),
        }
    }
}

/// Captures `body` (CALLS back-to-back calls) in a graph and returns the
/// median µs per call over REPLAYS replays.
pub(crate) fn time_graph(
    c: &Comm,
    barrier: &Barrier,
    body: &mut dyn FnMut() -> symm::Result<()>,
) -> symm::Result<f64> {
    let stream = c
        .cuda_stream()
        .ok_or_else(|| other(c, "benchmarks need GPU ranks"))?;
    body()?; // warm-up outside the graph (module loads, NCCL setup)
    c.synchronize()?;
    let ctx = stream.context().clone();
    let (start, end) = (
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv(c, "event"))?,
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv(c, "event"))?,
    );
    // An event recorded during capture becomes a timing node of the graph
    // only when recorded as external.
    let record_in_graph = |e: &symm::cudarc::driver::CudaEvent| {
        // SAFETY: a live event and stream of this rank's context; the stream
        // is capturing, which is what CU_EVENT_RECORD_EXTERNAL is for.
        unsafe {
            symm::cudarc::driver::sys::cuEventRecordWithFlags(
                e.cu_event(),
                stream.cu_stream(),
                symm::cudarc::driver::sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32,
            )
        }
        .result()
        .map_err(drv(c, "cuEventRecordWithFlags"))
    };
    let lead_in = *LEAD_IN.get().unwrap_or(&0);
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(drv(c, "begin_capture"))?;
    let mut capture = || -> symm::Result<()> {
        for _ in 0..lead_in {
            body()?;
        }
        if lead_in > 0 {
            record_in_graph(&start)?;
        }
        for _ in 0..CALLS {
            body()?;
        }
        if lead_in > 0 {
            record_in_graph(&end)?;
        }
        Ok(())
    };
    let captured = capture();
    // The capture ends even where a call failed, so that the stream is
    // usable again (the error is the call's, not the capture's).
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    captured?;
    let graph = graph
        .map_err(drv(c, "end_capture"))?
        .ok_or_else(|| other(c, "empty graph"))?;
    let mut us = Vec::new();
    for rep in 0..REPLAYS + 2 {
        barrier.wait()?;
        c.synchronize()?;
        if lead_in == 0 {
            start.record(&stream).map_err(drv(c, "record"))?;
        }
        graph.launch().map_err(drv(c, "graph launch"))?;
        if lead_in == 0 {
            end.record(&stream).map_err(drv(c, "record"))?;
        }
        c.synchronize()?;
        if rep >= 2 {
            us.push(
                f64::from(start.elapsed_ms(&end).map_err(drv(c, "elapsed"))?) * 1e3 / CALLS as f64,
            );
        }
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

/// One rank's NCCL communicator, over the same GPUs as the symm group.
pub(crate) struct Nccl {
    pub(crate) comm: nccl_sys::ncclComm_t,
}

impl Nccl {
    pub(crate) fn new(c: &Comm) -> symm::Result<Nccl> {
        let key = "bench/nccl-id";
        if c.rank() == 0 {
            let id =
                nccl::get_uniqueid().map_err(|e| other(c, format!("ncclGetUniqueId: {e:?}")))?;
            let bytes: Vec<u8> = id.internal.iter().map(|&b| b as u8).collect();
            c.store()
                .set(key, &bytes)
                .map_err(|source| c.store_error(source))?;
        }
        let bytes = c
            .store()
            .get(key, T)
            .map_err(|source| c.store_error(source))?;
        let mut id = nccl_sys::ncclUniqueId { internal: [0; 128] };
        for (d, s) in id.internal.iter_mut().zip(bytes) {
            *d = s as _;
        }
        let mut comm = std::ptr::null_mut();
        c.cuda_stream()
            .ok_or_else(|| other(c, "GPU"))?
            .context()
            .bind_to_thread()
            .map_err(drv(c, "bind"))?;
        // SAFETY: `comm` is a valid out-pointer; every rank calls this with
        // the same id, concurrently, from its own thread.
        unsafe { nccl::comm_init_rank(&mut comm, c.world_size() as i32, id, c.rank() as i32) }
            .map_err(|e| other(c, format!("ncclCommInitRank: {e:?}")))?;
        Ok(Nccl { comm })
    }

    /// The rank's stream, as NCCL takes it.
    pub(crate) fn stream(c: &Comm) -> symm::Result<nccl_sys::cudaStream_t> {
        Ok(c.cuda_stream().ok_or_else(|| other(c, "GPU"))?.cu_stream() as _)
    }

    /// `ncclAllReduce` by `op` of `n` elements from `src` into `dst`.
    pub(crate) fn all_reduce(
        &self,
        c: &Comm,
        (src, dst): (u64, u64),
        n: usize,
        dtype: nccl_sys::ncclDataType_t,
        op: nccl_sys::ncclRedOp_t,
    ) -> symm::Result<()> {
        let stream = Nccl::stream(c)?;
        // SAFETY: src and dst are device buffers of n elements on this rank's
        // device, alive until the benchmark synchronises.
        unsafe { nccl::all_reduce(src as _, dst as _, n, dtype, op, self.comm, stream) }
            .map(|_| ())
            .map_err(|e| other(c, format!("ncclAllReduce: {e:?}")))
    }
}

/// NCCL buffers from ncclMemAlloc, registered as symmetric windows.
pub(crate) struct Window {
    pub(crate) ptr: *mut std::ffi::c_void,
    win: nccl_sys::ncclWindow_t,
}

impl Window {
    /// Whether the loaded NCCL has symmetric windows (2.27 and later).
    pub(crate) fn available() -> bool {
        [
            "ncclMemAlloc",
            "ncclMemFree",
            "ncclCommWindowRegister",
            "ncclCommWindowDeregister",
        ]
        .iter()
        .all(|s| nccl_exports(s))
    }

    pub(crate) fn new(c: &Comm, n: &Nccl, bytes: usize) -> symm::Result<Window> {
        if !Window::available() {
            return Err(other(c, "the loaded NCCL has no symmetric windows"));
        }
        let mut ptr = std::ptr::null_mut();
        let mut win = std::ptr::null_mut();
        // SAFETY: valid out-pointers; the registration is collective and every
        // rank registers the same size in the same order.
        unsafe {
            nccl_sys::ncclMemAlloc(&mut ptr, bytes)
                .result()
                .map_err(|e| other(c, format!("ncclMemAlloc: {e:?}")))?;
            nccl_sys::ncclCommWindowRegister(n.comm, ptr, bytes, &mut win, 1)
                .result()
                .map_err(|e| other(c, format!("ncclCommWindowRegister: {e:?}")))?;
        }
        Ok(Window { ptr, win })
    }

    pub(crate) fn free(self, n: &Nccl) {
        // SAFETY: registered and allocated above; no work uses them any more.
        unsafe {
            let _ = nccl_sys::ncclCommWindowDeregister(n.comm, self.win);
            let _ = nccl_sys::ncclMemFree(self.ptr);
        }
    }
}

/// Median µs of `steps` steps of `body`, each timed alone by the host
/// (after a warm-up), for steps that synchronise inside (those whose
/// sizes the host reads, which no graph can hold).
pub(crate) fn time_steps(
    c: &Comm,
    steps: usize,
    body: &mut dyn FnMut() -> symm::Result<()>,
) -> symm::Result<f64> {
    body()?;
    c.synchronize()?;
    let mut us = Vec::with_capacity(steps);
    for _ in 0..steps {
        c.host_barrier()?;
        let t = std::time::Instant::now();
        body()?;
        c.synchronize()?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}
