//! What a kernel argument or a copy is, whoever allocated it: the sealed
//! [`DeviceSlice`] trait, where its memory lives ([`Memory`]), and binding
//! it to a rank's stream ([`Binder`], [`BoundSlice`]). The memory types
//! above (`interop`, `buffer`, `pool`) implement the trait in their own
//! files, so this one knows none of them.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaStream, SyncOnDrop};

use crate::comm::{Comm, Owner};
use crate::dtype::Element;
use crate::error::Result;

/// Reads `len` elements at `ptr` (already bounds-checked) into a new vector.
pub(crate) fn read_elems<T: Element>(
    backend: &dyn crate::backend::Backend,
    ptr: u64,
    len: usize,
) -> Result<Vec<T>> {
    let mut bytes = vec![0u8; len * std::mem::size_of::<T>()];
    backend.read(ptr, &mut bytes)?;
    let mut out: Vec<T> = Vec::with_capacity(len);
    // SAFETY: `bytes` holds exactly `len` elements' worth of bytes, every bit
    // pattern is a valid `T` (Element is sealed to POD types), and the
    // destination has capacity for `len` elements.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(len);
    }
    Ok(out)
}

/// Keeps [`DeviceSlice`] to the types whose address and length a launch
/// can trust: symm's buffers, and cudarc's, which vouch for theirs.
pub(crate) mod sealed {
    pub trait Sealed {}
}

impl<T: Element> sealed::Sealed for BoundSlice<'_, T> {}

/// Device memory a kernel can take as a `&[T]` or `&mut [T]` parameter, and
/// that [`Comm::copy`] and the peer copies of
/// [`SymmetricMemory`](crate::SymmetricMemory) move: symm's own buffers
/// ([`SymmBuffer`](crate::SymmBuffer), [`SymmView`](crate::SymmView),
/// [`DeviceBuffer`](crate::DeviceBuffer), [`PoolTensor`](crate::PoolTensor))
/// and cudarc's ([`CudaSlice`](cudarc::driver::CudaSlice),
/// [`CudaView`](cudarc::driver::CudaView),
/// [`CudaViewMut`](cudarc::driver::CudaViewMut); a `CudaView` is read-only,
/// so passing one where the kernel writes is an error).
///
/// The trait is sealed, because a launch trusts the address and length.
/// A launch also checks that the memory is the launching rank's: symm's
/// memory of this rank in any of its groups (a subgroup's, the parent's)
/// passes; symm's memory of another rank, cudarc memory of another device
/// or CUDA context, or cudarc memory given to an emulated rank, is
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the
/// argument and both ranks' groups.
///
/// cudarc memory is used in cudarc's stream order. With event tracking on
/// (cudarc's default), the rank's stream first waits for the memory's
/// earlier writes (and, to write it, its reads), and cudarc's later users
/// of it, its free included, wait for the rank's work on it; where the
/// memory's context object has one stream only (cudarc then records no
/// events), the rank's stream and that one are joined both ways instead.
/// With tracking off (`CudaContext::disable_event_tracking`, which is
/// `unsafe` for this reason, and which capturing a CUDA graph needs, since
/// a capture cannot wait for events recorded outside it), ordering is the
/// caller's, as it is for cudarc's own operations.
pub trait DeviceSlice<T: Element>: sealed::Sealed {
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[doc(hidden)]
    fn __memory(&self) -> Memory;
    /// cudarc memory's own stream (the one it was allocated on).
    #[doc(hidden)]
    fn __home(&self) -> Option<&Arc<CudaStream>> {
        None
    }
    /// cudarc memory's address, with the guard that records its use on
    /// `stream` when dropped (after the work is enqueued); `None` for
    /// memory whose [`Memory`] holds its address.
    #[doc(hidden)]
    fn __bind<'a>(&'a self, _stream: &'a CudaStream) -> Option<(u64, SyncOnDrop<'a>)> {
        None
    }
    /// [`Self::__bind`] to write; `None` also for read-only memory.
    #[doc(hidden)]
    fn __bind_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> Option<(u64, SyncOnDrop<'a>)> {
        None
    }
    /// Whose memory it is, in words (`rank 1 of group symm.split0[0,1]`),
    /// for an error that refuses it; `None` where the memory does not say.
    #[doc(hidden)]
    fn __whose(&self) -> Option<String> {
        None
    }
}

/// Where a [`DeviceSlice`]'s memory lives, as a launch checks it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Allocated by symm for `owner`, at `ptr`.
    Rank { owner: Owner, ptr: u64 },
    /// A [`BoundSlice`] of the rank `owner`: at `ptr`, bound to the stream
    /// `stream` if it is cudarc memory (whose stream ordering the binding
    /// did on that stream), `writable` or not.
    Bound {
        owner: Owner,
        ptr: u64,
        stream: Option<usize>,
        writable: bool,
    },
    /// cudarc memory of the CUDA context `ctx` on device `ordinal`. Its
    /// address comes only with its stream ordering
    /// ([`DeviceSlice::__bind`]).
    Cuda { ctx: usize, ordinal: usize },
}

/// After a binding on a rank's stream `rank` of cudarc memory whose context
/// object tracks events on one stream only, `home` (which cudarc then never
/// orders against others): makes `home` wait for `rank`'s work when the
/// binding ends, so that the memory's free (on `home`) and the user's
/// later work there come after the rank's use of it.
struct JoinAfter<'a> {
    home: Arc<CudaStream>,
    rank: &'a CudaStream,
}

impl Drop for JoinAfter<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.home.join(self.rank) {
            tracing::warn!("ordering cudarc memory's stream after the rank's failed: {e}");
        }
    }
}

/// A [`DeviceSlice`] checked for one rank and bound to its stream, from
/// [`Comm::bind`] or [`Comm::bind_mut`]: its address for checks of
/// alignment and overlap, and, for cudarc memory, its stream ordering
/// (the rank's stream has waited for the memory's earlier uses; dropping
/// this records the rank's work on it, so that cudarc waits for that).
/// Itself a `DeviceSlice` of that rank and stream, which a launch takes
/// without binding again: drop it after the work that uses it is enqueued.
pub struct BoundSlice<'a, T: Element> {
    ptr: u64,
    len: usize,
    owner: Owner,
    /// The stream a cudarc binding was made on.
    stream: Option<usize>,
    writable: bool,
    _sync: Option<SyncOnDrop<'a>>,
    _join: Option<JoinAfter<'a>>,
    _t: PhantomData<&'a [T]>,
}

impl<T: Element> std::fmt::Debug for BoundSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BoundSlice<{}>({:#x}, len {}{})",
            T::DTYPE,
            self.ptr,
            self.len,
            if self.writable { ", writable" } else { "" }
        )
    }
}

impl<T: Element> BoundSlice<'_, T> {
    /// Device address of element 0 (a host address on the emulator).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes from [`device_ptr`](Self::device_ptr) to the end.
    fn byte_len(&self) -> u64 {
        (self.len * std::mem::size_of::<T>()) as u64
    }

    /// Elements `range` of this binding, for reading (`None` where the
    /// range is not inside it): for a call that reads part of what it
    /// writes. This binding keeps the stream ordering for both.
    pub fn sub(&self, range: std::ops::Range<usize>) -> Option<BoundSlice<'_, T>> {
        self.part(range, false)
    }

    /// [`sub`](Self::sub), writable where this binding is: for a call
    /// that writes part of it.
    pub fn sub_mut(&mut self, range: std::ops::Range<usize>) -> Option<BoundSlice<'_, T>> {
        self.part(range, self.writable)
    }

    fn part(&self, range: std::ops::Range<usize>, writable: bool) -> Option<BoundSlice<'_, T>> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        let at = self.ptr + (range.start * std::mem::size_of::<T>()) as u64;
        Some(self.derived(at, range.len(), writable))
    }

    /// A binding of `len` `U`s at `ptr` inside this one, which keeps the
    /// stream ordering for both.
    fn derived<U: Element>(&self, ptr: u64, len: usize, writable: bool) -> BoundSlice<'_, U> {
        BoundSlice {
            ptr,
            len,
            owner: self.owner,
            stream: self.stream,
            writable,
            _sync: None,
            _join: None,
            _t: PhantomData,
        }
    }

    /// This binding's memory as bytes, for reading (every element type is
    /// plain bytes: any pattern read is a valid `u8`).
    pub fn bytes(&self) -> BoundSlice<'_, u8> {
        self.as_bytes(false)
    }

    /// [`bytes`](Self::bytes), writable where this binding is. Any bytes
    /// written are a valid `T`: every [`Element`] accepts every bit
    /// pattern.
    pub fn bytes_mut(&mut self) -> BoundSlice<'_, u8> {
        self.as_bytes(self.writable)
    }

    fn as_bytes(&self, writable: bool) -> BoundSlice<'_, u8> {
        self.derived(self.ptr, self.len * std::mem::size_of::<T>(), writable)
    }

    /// Whether this and `other` share a byte.
    pub(crate) fn overlaps<U: Element>(&self, other: &BoundSlice<'_, U>) -> bool {
        self.ptr < other.ptr + other.byte_len() && other.ptr < self.ptr + self.byte_len()
    }
}

impl<T: Element> DeviceSlice<T> for BoundSlice<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn __memory(&self) -> Memory {
        Memory::Bound {
            owner: self.owner,
            ptr: self.ptr,
            stream: self.stream,
            writable: self.writable,
        }
    }
}

/// What binds memory for a rank: its identity, its group's label (for
/// errors) and its backend (whose stream the work goes on).
pub(crate) struct Binder<'a> {
    pub owner: Owner,
    pub rank: usize,
    pub group: &'a str,
    pub name: &'a crate::GroupName,
    pub backend: &'a dyn crate::backend::Backend,
}

impl<'a> Binder<'a> {
    pub(crate) fn of(comm: &'a Comm) -> Binder<'a> {
        Binder {
            owner: comm.owner(),
            rank: comm.rank(),
            group: comm.group_label(),
            name: comm.group_name(),
            backend: &*comm.backend,
        }
    }

    /// Refuses symm's memory of `owner` (argument `name`, whose owner
    /// `whose` describes) unless it is this rank's, in this group or
    /// another of the rank's groups (which share its device and streams).
    fn reach(
        &self,
        name: &str,
        owner: Owner,
        whose: impl FnOnce() -> Option<String>,
    ) -> Result<()> {
        if owner.id == self.owner.id || owner.home == self.owner.home {
            return Ok(());
        }
        let whose = whose().unwrap_or_else(|| "another rank".into());
        Err(self.invalid(format!(
            "argument `{name}` is memory of {whose}, and this runs on rank {} of group {} \
             ({}): a rank's memory crosses its own groups on its own device only; copy it \
             to this rank first",
            self.rank,
            self.group,
            self.backend.label()
        )))
    }

    fn invalid(&self, message: String) -> crate::Error {
        crate::Error::InvalidArgument {
            rank: self.rank,
            group: self.name.clone(),
            message,
        }
    }

    fn stream_id(&self) -> Option<usize> {
        self.backend.cuda_stream().map(|s| s.cu_stream() as usize)
    }

    fn driver(&self, op: &'static str, source: cudarc::driver::DriverError) -> crate::Error {
        crate::Error::Driver {
            rank: self.rank,
            group: self.name.clone(),
            device: self.backend.label(),
            op,
            source,
        }
    }

    /// Orders the rank's `stream` after cudarc memory whose own stream is
    /// `home`, where cudarc's events do not: when `home`'s context object
    /// tracks events but has one stream only (cudarc then records nothing),
    /// `stream` waits for everything queued on `home` now, and the result
    /// makes `home` wait for `stream` when the binding ends. (Without event
    /// tracking, which is `unsafe` to turn off, ordering is the user's; with
    /// it and several streams, cudarc's events do it.)
    fn join_home(
        &self,
        home: Option<&Arc<CudaStream>>,
        stream: &'a CudaStream,
    ) -> Result<Option<JoinAfter<'a>>> {
        let Some(home) = home else { return Ok(None) };
        let ctx = home.context();
        if !ctx.is_event_tracking() || ctx.is_managing_stream_synchronization() {
            return Ok(None);
        }
        stream
            .join(home)
            .map_err(|e| self.driver("cuStreamWaitEvent", e))?;
        Ok(Some(JoinAfter {
            home: home.clone(),
            rank: stream,
        }))
    }

    /// Checks memory `m` (argument `name`, whose owner `whose` describes)
    /// for this rank, to write if `write`: its address if it has one, or
    /// else the stream on which to bind cudarc memory.
    fn check(
        &self,
        name: &str,
        m: Memory,
        write: bool,
        whose: impl FnOnce() -> Option<String>,
    ) -> Result<Checked<'a>> {
        match m {
            Memory::Rank { owner, ptr } => {
                self.reach(name, owner, whose)?;
                Ok(Checked::Addr(ptr, None))
            }
            Memory::Bound {
                owner,
                ptr,
                stream,
                writable,
            } => {
                // Bound symm memory is an address of the rank's, which any
                // of its groups may use; cudarc memory is bound to one
                // stream's order.
                if stream.is_none() {
                    self.reach(name, owner, whose)?;
                } else if owner.id != self.owner.id {
                    return Err(self.invalid(format!(
                        "argument `{name}` is cudarc memory bound for another rank or group \
                         than this one (rank {} of group {}); bind it with the `Comm` whose \
                         stream does the work",
                        self.rank, self.group
                    )));
                }
                if stream.is_some() && stream != self.stream_id() {
                    return Err(self.invalid(format!(
                        "argument `{name}` is cudarc memory bound to another stream of this \
                         rank; bind it with the `Comm` whose stream does the work"
                    )));
                }
                if write && !writable {
                    return Err(self.invalid(format!(
                        "argument `{name}` was bound for reading (`Comm::bind`); bind it with \
                         `Comm::bind_mut` to write it"
                    )));
                }
                Ok(Checked::Addr(ptr, stream))
            }
            Memory::Cuda { ctx, ordinal } => {
                let Some(stream) = self.backend.tracked_stream() else {
                    return Err(self.invalid(format!(
                        "argument `{name}` is CUDA memory (cuda:{ordinal}), but rank {} is \
                         emulated ({}), which cannot reach GPU memory; use symm's buffers on \
                         the emulator",
                        self.rank,
                        self.backend.label()
                    )));
                };
                let own = stream.context();
                if ctx != own.cu_ctx() as usize {
                    let which = if ordinal == own.ordinal() {
                        format!("another CUDA context on cuda:{ordinal}")
                    } else {
                        format!("cuda:{ordinal}")
                    };
                    return Err(self.invalid(format!(
                        "argument `{name}` is CUDA memory of {which}, but rank {} runs on {} \
                         (its stream's context); allocate it on that device's primary \
                         context (`CudaContext::new({})`)",
                        self.rank,
                        self.backend.label(),
                        own.ordinal()
                    )));
                }
                Ok(Checked::Cuda(stream))
            }
        }
    }

    /// The check of `s` (argument `name`) alone: nothing is bound.
    pub(crate) fn check_only<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        name: &str,
        s: &S,
        write: bool,
    ) -> Result<()> {
        self.check(name, s.__memory(), write, || s.__whose())
            .map(|_| ())
    }

    /// `s` (argument `name`), checked and bound for reading.
    pub(crate) fn bind<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        name: &str,
        s: &'a S,
    ) -> Result<BoundSlice<'a, T>> {
        let (ptr, stream, sync, join) =
            match self.check(name, s.__memory(), false, || s.__whose())? {
                Checked::Addr(ptr, stream) => (ptr, stream, None, None),
                Checked::Cuda(stream) => {
                    let join = self.join_home(s.__home(), stream)?;
                    let Some((ptr, sync)) = s.__bind(stream) else {
                        return Err(self.invalid(format!("argument `{name}` cannot be read")));
                    };
                    (ptr, self.stream_id(), Some(sync), join)
                }
            };
        Ok(self.bound(ptr, s.len(), stream, false, sync, join))
    }

    /// `s` (argument `name`), checked and bound for writing.
    pub(crate) fn bind_mut<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        name: &str,
        s: &'a mut S,
    ) -> Result<BoundSlice<'a, T>> {
        let len = s.len();
        let memory = s.__memory();
        let (ptr, stream, sync, join) = match self.check(name, memory, true, || s.__whose())? {
            Checked::Addr(ptr, stream) => (ptr, stream, None, None),
            Checked::Cuda(stream) => {
                let join = self.join_home(s.__home(), stream)?;
                let Some((ptr, sync)) = s.__bind_mut(stream) else {
                    return Err(self.invalid(format!(
                        "argument `{name}` is a read-only cudarc view (`CudaView`), but it \
                         is written; pass a `CudaViewMut` or the `CudaSlice`"
                    )));
                };
                (ptr, self.stream_id(), Some(sync), join)
            }
        };
        Ok(self.bound(ptr, len, stream, true, sync, join))
    }

    fn bound<T: Element>(
        &self,
        ptr: u64,
        len: usize,
        stream: Option<usize>,
        writable: bool,
        sync: Option<SyncOnDrop<'a>>,
        join: Option<JoinAfter<'a>>,
    ) -> BoundSlice<'a, T> {
        BoundSlice {
            ptr,
            len,
            owner: self.owner,
            stream,
            writable,
            _sync: sync,
            _join: join,
            _t: PhantomData,
        }
    }
}

/// What [`Binder::check`] found.
enum Checked<'a> {
    /// An address, bound to this stream if it is cudarc memory's.
    Addr(u64, Option<usize>),
    /// cudarc memory, to bind on this stream (the rank's, as the device's
    /// context object sees it).
    Cuda(&'a CudaStream),
}

/// Address of elements `offset..offset + n` of a `len`-element buffer at
/// `base`, or an error naming `what`.
pub(crate) fn checked<T: Element>(
    comm: &Comm,
    base: u64,
    len: usize,
    offset: usize,
    n: usize,
    what: &str,
) -> Result<u64> {
    match offset.checked_add(n) {
        Some(end) if end <= len => Ok(base + (offset * std::mem::size_of::<T>()) as u64),
        _ => Err(comm.invalid(format!(
            "elements {offset}..{} are out of bounds for a {what} of {len}",
            offset.saturating_add(n)
        ))),
    }
}
