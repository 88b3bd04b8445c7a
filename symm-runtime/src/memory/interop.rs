//! The user's CUDA memory: cudarc's slices as [`DeviceSlice`]s (kernel
//! arguments, all-reduce outputs, copies), symm's memory as cudarc slices
//! (for cuBLAS or the user's own kernels), and device-to-device copies
//! between the two on a rank's stream.

use std::marker::PhantomData;
use std::ops::{Deref, RangeBounds};
use std::sync::Arc;

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop,
};

use crate::comm::Comm;
use crate::cuda::Borrowed;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::memory::slice::{sealed, Binder, BoundSlice, DeviceSlice, Memory};

/// Where cudarc memory on `stream` (the stream it was allocated on) lives.
fn cuda_memory(stream: &CudaStream) -> Memory {
    let ctx = stream.context();
    Memory::Cuda {
        ctx: ctx.cu_ctx() as usize,
        ordinal: ctx.ordinal(),
    }
}

/// The [`DeviceSlice`] impl of a cudarc slice type, which knows its own
/// stream (`cudarc::driver::DeviceSlice::stream`), with `mut` when it may be
/// written.
macro_rules! cuda_slice {
    ($ty:ty $(, $mutable:ident)?) => {
        impl<T: Element> DeviceSlice<T> for $ty {
            fn len(&self) -> usize {
                cudarc::driver::DeviceSlice::len(self)
            }
            fn __memory(&self) -> Memory {
                cuda_memory(cudarc::driver::DeviceSlice::stream(self))
            }
            fn __home(&self) -> Option<&Arc<CudaStream>> {
                Some(cudarc::driver::DeviceSlice::stream(self))
            }
            fn __bind<'a>(&'a self, stream: &'a CudaStream) -> Option<(u64, SyncOnDrop<'a>)> {
                Some(self.device_ptr(stream))
            }
            $(cuda_slice!(@$mutable);)?
        }
    };
    (@mutable) => {
        fn __bind_mut<'a>(&'a mut self, stream: &'a CudaStream) -> Option<(u64, SyncOnDrop<'a>)> {
            Some(self.device_ptr_mut(stream))
        }
    };
}

impl<T> sealed::Sealed for CudaSlice<T> {}
impl<T> sealed::Sealed for CudaView<'_, T> {}
impl<T> sealed::Sealed for CudaViewMut<'_, T> {}

cuda_slice!(CudaSlice<T>, mutable);
cuda_slice!(CudaView<'_, T>);
cuda_slice!(CudaViewMut<'_, T>, mutable);

/// A cudarc view of symm memory, to read it with cuBLAS or the user's own
/// kernels in place: a [`CudaSlice`] (through `Deref`: `as_view`, `slice`,
/// a kernel argument) on the rank's stream, which borrows the memory and
/// never frees it. From [`SymmBuffer::cuda_view`](crate::SymmBuffer::cuda_view),
/// [`SymmView::cuda_view`](crate::SymmView::cuda_view),
/// [`DeviceBuffer::cuda_view`](crate::DeviceBuffer::cuda_view) or
/// [`Comm::cuda_view`].
///
/// Ordering: work on the rank's stream needs nothing more. Where the
/// stream's context tracks events (cudarc's default), cudarc work on other
/// streams waits for what the rank's stream had queued when the view was
/// made, and dropping the view makes the rank's stream wait for that work.
/// Without event tracking (`CudaContext::disable_event_tracking`, as CUDA
/// graph capture across streams needs), ordering is the caller's.
pub struct CudaRef<'a, T> {
    mem: Borrowed<T>,
    _borrow: PhantomData<&'a [T]>,
}

/// [`CudaRef`] that writes too: [`as_view_mut`](Self::as_view_mut) and
/// [`slice_mut`](Self::slice_mut) give cudarc's `CudaViewMut`, which
/// cuBLAS outputs and kernel arguments take. From
/// [`SymmBuffer::cuda_view_mut`](crate::SymmBuffer::cuda_view_mut) and the
/// like.
pub struct CudaRefMut<'a, T> {
    mem: Borrowed<T>,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<T> Deref for CudaRef<'_, T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        self.mem.get()
    }
}

impl<T> Deref for CudaRefMut<'_, T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        self.mem.get()
    }
}

impl<T> CudaRefMut<'_, T> {
    /// The whole memory, writable.
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.mem.get_mut().as_view_mut()
    }

    /// Elements `range`, writable, or `None` when out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Option<CudaViewMut<'_, T>> {
        self.mem.get_mut().try_slice_mut(range)
    }
}

impl<T> std::fmt::Debug for CudaRef<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaRef(len {}, cuda:{})", self.len(), self.ordinal())
    }
}

impl<T> std::fmt::Debug for CudaRefMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaRefMut(len {}, cuda:{})", self.len(), self.ordinal())
    }
}

/// `len` elements at `ptr` of the memory of the rank whose backend `comm`
/// has, as a cudarc slice on its stream.
///
/// # Safety
///
/// `ptr` must be memory symm allocated for that rank (so mapped in its
/// device's context) for `len` elements, and the caller must borrow that
/// memory for as long as the result lives.
pub(crate) unsafe fn view_of<T: Element>(comm: &Comm, ptr: u64, len: usize) -> Result<Borrowed<T>> {
    let Some(stream) = comm.backend.cuda_stream() else {
        return Err(comm.invalid(format!(
            "rank {} is emulated ({}): its memory is host memory, which cudarc cannot view",
            comm.rank(),
            comm.device()
        )));
    };
    // SAFETY: as the caller guarantees, `len` elements at `ptr` are the
    // rank's, allocated in its device's primary context, which its stream
    // belongs to (`with_cuda_stream` checks), and borrowed for the result's
    // life; every bit pattern is a valid `T` (`Element` is sealed to plain
    // numbers).
    unsafe { Borrowed::new(stream, ptr, len) }.map_err(|e| Error::Driver {
        rank: comm.rank(),
        group: comm.group_name().clone(),
        device: comm.device(),
        op: e.op,
        source: e.err,
    })
}

impl<T> CudaRef<'_, T> {
    pub(crate) fn new(mem: Borrowed<T>) -> Self {
        CudaRef {
            mem,
            _borrow: PhantomData,
        }
    }
}

impl<T> CudaRefMut<'_, T> {
    pub(crate) fn new(mem: Borrowed<T>) -> Self {
        CudaRefMut {
            mem,
            _borrow: PhantomData,
        }
    }
}

impl Comm {
    /// Checks that `s` (named `name` in errors) is memory this rank may
    /// use, and binds it to this handle's stream for reading: its address
    /// (for checks of alignment and overlap) and, for cudarc memory, its
    /// stream ordering. A launch or copy on this handle takes the result as
    /// it would `s`; drop it after that work is enqueued. See
    /// [`DeviceSlice`] for the checks.
    pub fn bind<'a, T: Element, S: DeviceSlice<T> + ?Sized>(
        &'a self,
        name: &str,
        s: &'a S,
    ) -> Result<BoundSlice<'a, T>> {
        Binder::of(self).bind(name, s)
    }

    /// The check of [`bind`](Self::bind) (`write`: of
    /// [`bind_mut`](Self::bind_mut)) alone, with no binding and nothing
    /// enqueued: whether this rank may use `s`, as an argument named
    /// `name`. For checking every argument of a call before any of its
    /// work (a read-only `CudaView` to write is found only by binding it).
    pub fn check_memory<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        name: &str,
        s: &S,
        write: bool,
    ) -> Result<()> {
        Binder::of(self).check_only(name, s, write)
    }

    /// [`bind`](Self::bind) for writing (a read-only `CudaView` is an
    /// error).
    pub fn bind_mut<'a, T: Element, S: DeviceSlice<T> + ?Sized>(
        &'a self,
        name: &str,
        s: &'a mut S,
    ) -> Result<BoundSlice<'a, T>> {
        Binder::of(self).bind_mut(name, s)
    }

    /// Copies `src` into `dst`, which must have as many elements and must
    /// not overlap it, device to device on this handle's stream: enqueued
    /// in stream order and not waited for (capturable into a CUDA graph),
    /// done by the copy engines. Either side may be symm's memory of this
    /// rank or cudarc memory of its device (see [`DeviceSlice`]): user
    /// memory into a symmetric buffer before a collective, and back. On the
    /// emulator, symm's buffers are copied at once.
    pub fn copy<T: Element>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut (impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        let b = Binder::of(self);
        let s = b.bind("src", src)?;
        let d = b.bind_mut("dst", dst)?;
        if s.len() != d.len() {
            return Err(self.invalid(format!(
                "copy of {} elements into {}: the lengths differ",
                s.len(),
                d.len()
            )));
        }
        copy_bound(&b, &s, &d)
    }

    /// A cudarc view of `s`, this rank's symm memory (a buffer, a view, or
    /// any other `DeviceSlice` symm allocated for it), on this handle's
    /// stream; see [`CudaRef`]. GPU ranks only (the emulator's memory is
    /// host memory); cudarc memory is an error (it is a cudarc slice
    /// already).
    pub fn cuda_view<'a, T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        s: &'a S,
    ) -> Result<CudaRef<'a, T>> {
        let ptr = self.symm_address(s, false)?;
        // SAFETY: `symm_address` found `s` in this rank's symm memory, and
        // the result borrows `s`.
        Ok(CudaRef::new(unsafe { view_of(self, ptr, s.len()) }?))
    }

    /// [`cuda_view`](Self::cuda_view), writable.
    pub fn cuda_view_mut<'a, T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        s: &'a mut S,
    ) -> Result<CudaRefMut<'a, T>> {
        let ptr = self.symm_address(s, true)?;
        // SAFETY: `symm_address` found `s` in this rank's symm memory, and
        // the result borrows `s` exclusively.
        Ok(CudaRefMut::new(unsafe { view_of(self, ptr, s.len()) }?))
    }

    /// The address of `s`, this rank's symm memory (`write`: for a
    /// writable view, which a binding for reading cannot give).
    fn symm_address<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        s: &S,
        write: bool,
    ) -> Result<u64> {
        if let Memory::Bound {
            writable: false, ..
        } = s.__memory()
        {
            if write {
                return Err(self.invalid(
                    "cuda_view_mut of memory bound for reading (`Comm::bind`); bind it with \
                     `Comm::bind_mut`"
                        .to_string(),
                ));
            }
        }
        match s.__memory() {
            Memory::Rank { owner, ptr }
            | Memory::Bound {
                owner,
                ptr,
                stream: None,
                ..
            } if owner.home == self.owner().home => Ok(ptr),
            Memory::Rank { .. } | Memory::Bound { stream: None, .. } => {
                Err(self.invalid("cuda_view of memory of another rank than this one".to_string()))
            }
            Memory::Bound { .. } | Memory::Cuda { .. } => Err(self
                .invalid("cuda_view of cudarc memory: it is a cudarc slice already".to_string())),
        }
    }
}

/// Copies `s` into `d` (bound by `b`, of equal lengths) on `b`'s stream.
pub(crate) fn copy_bound<T: Element>(
    b: &Binder<'_>,
    s: &BoundSlice<'_, T>,
    d: &BoundSlice<'_, T>,
) -> Result<()> {
    if s.is_empty() {
        return Ok(());
    }
    if s.overlaps(d) {
        return Err(Error::InvalidArgument {
            rank: b.rank,
            group: b.name.clone(),
            message: format!(
                "copy from {:#x} to {:#x} of {} elements: source and destination overlap",
                s.device_ptr(),
                d.device_ptr(),
                s.len()
            ),
        });
    }
    // SAFETY: both were bound by `b`: memory of its rank (symm's, or
    // cudarc's of its stream's context), valid for their lengths, which
    // are equal, and kept alive by the borrows the bound slices hold until
    // the copy is enqueued, after which cudarc's tracking (recorded as the
    // bindings drop) and symm's frees (which wait for the rank's streams)
    // keep it until the copy has run. They do not overlap (checked above).
    unsafe {
        b.backend.copy(
            d.device_ptr(),
            s.device_ptr(),
            s.len() * std::mem::size_of::<T>(),
        )
    }
}
