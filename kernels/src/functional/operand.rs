//! What a functional call takes and writes: [`Operand`]s, read wherever
//! they lie, and [`Output`]s, held by the call's [`Pending`](super::Pending) until it is
//! waited for.

use std::sync::Arc;

use symm::cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut};
use symm::{
    Comm, DeviceBuffer, DeviceSlice, Element, PoolTensor, Result, SymmBuffer, SymmView,
    SymmetricMemory,
};

use super::rule::Placed;

/// An input of a functional collective: this rank's device memory, with
/// where it lies (symmetric or not). Implemented for symm's buffers and
/// tensors, cudarc's memory, references to them, and [`Pending`](super::Pending) results.
/// Its methods are the layer's own (hidden): a call reads the input
/// through them.
///
/// symm's memory of any of the rank's groups is an input of any other:
/// it is symmetric memory only of the group that allocated it (a
/// subgroup's tensor is not the parent's, nor the parent's a subgroup's),
/// so another group's call reads it as plain memory (staged).
pub trait Operand<T: Element> {
    #[doc(hidden)]
    fn __memory(&self) -> &dyn DeviceSlice<T>;
    /// Where it lies, for a call of `comm`'s group.
    #[doc(hidden)]
    fn __placed(&self, _comm: &Comm) -> Placed {
        Placed::Plain
    }
    /// Every rank's view of it, where it is symmetric memory of `comm`'s
    /// group (never a rendezvous of another group's, which would wait
    /// for that group's ranks).
    #[doc(hidden)]
    fn __symmetric(&self, _comm: &Comm) -> Option<Result<Arc<SymmetricMemory>>> {
        None
    }
    /// Orders `stream` after the work that makes this input, where that
    /// work is in flight on another stream (a [`Pending`] of another
    /// `Collectives`).
    #[doc(hidden)]
    fn __order(&self, _stream: &Arc<CudaStream>) -> Result<()> {
        Ok(())
    }
}

/// An output of a functional collective: this rank's device memory,
/// owned (returned by [`Pending::wait`](super::Pending::wait)) or borrowed exclusively (`&mut`
/// of a buffer, a tensor or a cudarc slice; not a [`SymmView`], which is
/// `Copy` and would leave its buffer readable meanwhile).
pub trait Output<T: Element> {
    #[doc(hidden)]
    fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T>;
}

/// A buffer is symmetric for its own group, and for another group of the
/// rank's where the user rendezvoused it with that group
/// ([`SymmBuffer::rendezvous_in`]): read in place there, staged elsewhere.
impl<T: Element> Operand<T> for SymmBuffer<T> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn __placed(&self, comm: &Comm) -> Placed {
        if self.comm().same_group(comm) || self.rendezvoused_in(comm).is_some() {
            Placed::Symmetric
        } else {
            Placed::Plain
        }
    }
    fn __symmetric(&self, comm: &Comm) -> Option<Result<Arc<SymmetricMemory>>> {
        if self.comm().same_group(comm) {
            return Some(self.rendezvous());
        }
        self.rendezvoused_in(comm).map(Ok)
    }
}

/// A view is read in place at any offset, as symmetric memory of its own
/// ([`SymmView::symmetric`]), for its buffer's group: every rank passes
/// the same view.
impl<T: Element> Operand<T> for SymmView<'_, T> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn __placed(&self, comm: &Comm) -> Placed {
        if self.buffer().comm().same_group(comm) {
            Placed::Symmetric
        } else {
            Placed::Plain
        }
    }
    fn __symmetric(&self, comm: &Comm) -> Option<Result<Arc<SymmetricMemory>>> {
        self.buffer()
            .comm()
            .same_group(comm)
            .then(|| self.symmetric())
    }
}

impl<T: Element> Operand<T> for PoolTensor<T> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn __placed(&self, comm: &Comm) -> Placed {
        if self.comm().same_group(comm) {
            Placed::Pool {
                segment: self.place().1,
            }
        } else {
            Placed::Plain
        }
    }
    fn __symmetric(&self, comm: &Comm) -> Option<Result<Arc<SymmetricMemory>>> {
        self.comm().same_group(comm).then(|| self.rendezvous())
    }
}

macro_rules! plain_operand {
    ($($ty:ty),*) => {$(
        impl<T: Element> Operand<T> for $ty {
            fn __memory(&self) -> &dyn DeviceSlice<T> {
                self
            }
        }
    )*};
}
plain_operand!(
    DeviceBuffer<T>,
    CudaSlice<T>,
    CudaView<'_, T>,
    CudaViewMut<'_, T>
);

macro_rules! forward_operand {
    ($($ty:ty),*) => {$(
        impl<T: Element, X: Operand<T> + ?Sized> Operand<T> for $ty {
            fn __memory(&self) -> &dyn DeviceSlice<T> {
                (**self).__memory()
            }
            fn __placed(&self, comm: &Comm) -> Placed {
                (**self).__placed(comm)
            }
            fn __symmetric(&self, comm: &Comm) -> Option<Result<Arc<SymmetricMemory>>> {
                (**self).__symmetric(comm)
            }
            fn __order(&self, stream: &Arc<CudaStream>) -> Result<()> {
                (**self).__order(stream)
            }
        }
    )*};
}
forward_operand!(&X, &mut X);

macro_rules! outputs {
    ($($ty:ty),*) => {$(
        impl<T: Element> Output<T> for $ty {
            fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
                self
            }
        }
        impl<T: Element> Output<T> for &mut $ty {
            fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
                *self
            }
        }
    )*};
}
outputs!(DeviceBuffer<T>, PoolTensor<T>, SymmBuffer<T>, CudaSlice<T>);

impl<T: Element> Output<T> for &mut CudaViewMut<'_, T> {
    fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
        *self
    }
}
