//! The NCCL calls the functional layer makes, each issued under the
//! communicator's lock and noted for the watchdog.

use super::*;

impl Nccl {
    /// Runs `f` (one call into NCCL on the communicator, enqueueing on
    /// `stream`) under `calls`, waits for NCCL to finish issuing it, and
    /// notes it for the watchdog.
    fn call(
        &self,
        what: &str,
        stream: &CudaStream,
        f: impl FnOnce() -> std::result::Result<nccl::NcclStatus, nccl::NcclError>,
    ) -> Result<()> {
        let _one = self.enter()?;
        f().map_err(|e| fail(self.who(), format!("{what}: {}", code(&e))))?;
        self.settle(what)?;
        self.enqueued(stream);
        Ok(())
    }

    /// `ncclReduceScatter`: `recv` elements into `dst` of `world × recv` in `src`.
    ///
    /// # Safety
    ///
    /// `src` and `dst` hold those elements of `ty` on this rank's device,
    /// alive until the work on `stream` is done; every rank makes the same
    /// call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn reduce_scatter(
        &self,
        src: u64,
        dst: u64,
        recv: usize,
        ty: sys::ncclDataType_t,
        o: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.call("ncclReduceScatter", stream, || {
            // SAFETY: the caller's contract; the communicator is live
            // (`call` holds `calls` and checked `aborted`).
            unsafe {
                nccl::reduce_scatter(
                    src as _,
                    dst as _,
                    recv,
                    ty,
                    op(o),
                    self.comm,
                    stream.cu_stream() as _,
                )
            }
        })
    }

    /// `ncclBroadcast` of `bytes` from `root`.
    ///
    /// # Safety
    ///
    /// As [`Nccl::reduce_scatter`], for `bytes` in both (`src` is read on
    /// the root only).
    pub(crate) unsafe fn broadcast(
        &self,
        src: u64,
        dst: u64,
        bytes: usize,
        root: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        self.call("ncclBroadcast", stream, || {
            // SAFETY: the caller's contract; the communicator is live.
            unsafe {
                nccl::broadcast(
                    src as _,
                    dst as _,
                    bytes,
                    sys::ncclDataType_t::ncclUint8,
                    root as i32,
                    self.comm,
                    stream.cu_stream() as _,
                )
            }
        })
    }

    /// Point-to-point exchange in one NCCL group: `sends[r]` = (address,
    /// bytes) to rank r, `recvs[r]` from rank r (zero bytes: none).
    ///
    /// # Safety
    ///
    /// Every span is this rank's device memory alive until the work on
    /// `stream` is done; every rank's sends match its peers' receives.
    pub(crate) unsafe fn exchange(
        &self,
        sends: &[(u64, usize)],
        recvs: &[(u64, usize)],
        stream: &CudaStream,
    ) -> Result<()> {
        let ops: Vec<(usize, bool, u64, usize)> = sends
            .iter()
            .zip(recvs)
            .enumerate()
            .flat_map(|(peer, (&(sp, sb), &(rp, rb)))| {
                [(peer, true, sp, sb), (peer, false, rp, rb)]
            })
            .filter(|op| op.3 > 0)
            .collect();
        // SAFETY: the caller's contract.
        unsafe { self.p2p(&ops, stream) }
    }

    /// Sends and receives, `(peer, send, address, bytes)`, in one NCCL
    /// group.
    ///
    /// # Safety
    ///
    /// Every address holds its bytes on this rank's device, bound to
    /// `stream`, and every peer makes the matching operations.
    pub(crate) unsafe fn p2p(
        &self,
        ops: &[(usize, bool, u64, usize)],
        stream: &CudaStream,
    ) -> Result<()> {
        let ty = sys::ncclDataType_t::ncclUint8;
        self.group(stream, ops, |(peer, send, at, bytes), s| {
            // SAFETY: the caller's contract.
            unsafe {
                if send {
                    (
                        "ncclSend",
                        nccl::send(at as _, bytes, ty, peer as i32, self.comm, s),
                    )
                } else {
                    (
                        "ncclRecv",
                        nccl::recv(at as _, bytes, ty, peer as i32, self.comm, s),
                    )
                }
            }
        })
    }

    /// All-gathers (`(src, dst, bytes per rank)`) in one NCCL group.
    ///
    /// # Safety
    ///
    /// As [`Nccl::reduce_scatter`], for each `src` of `bytes` and `dst` of
    /// `world × bytes`.
    pub(crate) unsafe fn all_gathers(
        &self,
        ops: &[(u64, u64, usize)],
        stream: &CudaStream,
    ) -> Result<()> {
        let ty = sys::ncclDataType_t::ncclUint8;
        self.group(stream, ops, |(src, dst, bytes), s| {
            // SAFETY: the caller's contract.
            ("ncclAllGather", unsafe {
                nccl::all_gather(src as _, dst as _, bytes, ty, self.comm, s)
            })
        })
    }

    /// All-reduces (`(src, dst, count)`) in one NCCL group.
    ///
    /// # Safety
    ///
    /// As [`Nccl::reduce_scatter`], for each `src` and `dst` of `count`.
    pub(crate) unsafe fn all_reduces(
        &self,
        ops: &[(u64, u64, usize)],
        ty: sys::ncclDataType_t,
        o: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.group(stream, ops, |(src, dst, count), s| {
            // SAFETY: the caller's contract.
            ("ncclAllReduce", unsafe {
                nccl::all_reduce(src as _, dst as _, count, ty, op(o), self.comm, s)
            })
        })
    }

    /// `call` for each of `ops` in one NCCL group on `stream`, under the
    /// communicator's lock; the first failure stops the rest, and the group
    /// is closed whatever happened.
    fn group<X: Copy>(
        &self,
        stream: &CudaStream,
        ops: &[X],
        call: impl Fn(
            X,
            sys::cudaStream_t,
        ) -> (
            &'static str,
            std::result::Result<nccl::NcclStatus, nccl::NcclError>,
        ),
    ) -> Result<()> {
        let s = stream.cu_stream() as sys::cudaStream_t;
        let _one = self.enter()?;
        let check = |what: &str, r: std::result::Result<nccl::NcclStatus, nccl::NcclError>| {
            r.map(|_| ())
                .map_err(|e| fail(self.who(), format!("{what}: {}", code(&e))))
        };
        check("ncclGroupStart", nccl::group_start())?;
        let mut r = Ok(());
        for &x in ops {
            let (what, res) = call(x, s);
            r = check(what, res);
            if r.is_err() {
                break;
            }
        }
        let end = check("ncclGroupEnd", nccl::group_end());
        r.and(end)?;
        self.settle("ncclGroupEnd")?;
        self.enqueued(stream);
        Ok(())
    }
}
