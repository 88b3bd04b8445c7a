//! [`Pending`]: a call in flight, which holds its output until it is
//! waited for.

use symm::cudarc::driver::CudaEvent;
use symm::Result;

use super::{wait_on, Collectives};

/// The result of a functional collective, in flight: it holds the output
/// until [`wait`](Self::wait) (device-side) or
/// [`wait_host`](Self::wait_host) gives it back. Dropped unwaited, it
/// waits device-side and says so at debug level.
#[must_use = "a collective's result is ready only after `wait` (dropping it waits, device-side)"]
pub struct Pending<'c, O> {
    pub(super) out: Option<O>,
    pub(super) done: Option<CudaEvent>,
    pub(super) coll: &'c Collectives,
    pub(super) what: &'static str,
}

impl<'c, O> Pending<'c, O> {
    pub(super) fn out(&self) -> &O {
        // Present until `wait` or `wait_host` consumes `self`.
        self.out
            .as_ref()
            .expect("a Pending holds its output until it is waited")
    }

    /// Orders the user's stream after the call (a device-side wait: the
    /// host does not block) and gives the output back. Kernel failures
    /// surface at the next [`Collectives::synchronize`] or
    /// [`wait_host`](Self::wait_host).
    pub fn wait(mut self) -> Result<O> {
        self.settle()?;
        Ok(self.out.take().expect("present until waited"))
    }

    /// Blocks until the call is done, reports any failure a kernel of the
    /// group's communication stream recorded, orders the user's stream
    /// after it, and gives the output back.
    pub fn wait_host(mut self) -> Result<O> {
        if let Some(e) = &self.done {
            e.synchronize()
                .map_err(|e| self.coll.driver("cuEventSynchronize", e))?;
        }
        self.coll.synchronize()?;
        self.settle()?;
        Ok(self.out.take().expect("present until waited"))
    }

    /// Whether the call is done on the device (always, on the emulator).
    /// On the user's stream, whether everything enqueued there is.
    pub fn is_done(&self) -> bool {
        match (&self.done, &self.coll.stream) {
            (Some(e), _) => e.is_complete(),
            // SAFETY: a live stream of this rank; a query only.
            (None, Some(s)) => unsafe { symm::cudarc::driver::sys::cuStreamQuery(s.cu_stream()) }
                .result()
                .is_ok(),
            (None, None) => true,
        }
    }

    fn settle(&mut self) -> Result<()> {
        if let Some(e) = self.done.take() {
            let r = match &self.coll.user_stream {
                Some(s) => wait_on(s, &e).map_err(|err| self.coll.driver("cuStreamWaitEvent", err)),
                None => Ok(()),
            };
            self.coll.give_event(e);
            r?;
        }
        Ok(())
    }
}

impl<O> Drop for Pending<'_, O> {
    fn drop(&mut self) {
        if self.out.is_some() {
            tracing::debug!(
                rank = self.coll.cs.rank(),
                call = self.what,
                "a collective's result was dropped unwaited: the user's stream waits for it"
            );
            if let Err(e) = self.settle() {
                tracing::warn!("waiting for a dropped collective result failed: {e}");
            }
        }
    }
}
