//! Argument checks that every family makes, as the problem a rank
//! publishes in the agreement (a [`Problem`]: its kind and its text, so
//! that every rank can report every rank's), or as an error on this rank.

use symm::{BoundSlice, Comm, Element, SymmetricMemory};

use super::agree::Problem;

/// An invalid-argument error on `comm`'s rank.
pub(crate) fn invalid(comm: &Comm, message: String) -> symm::Error {
    comm.error(symm::ErrorKind::InvalidArgument, message)
}

/// An unsupported-call error on `comm`'s rank: a route, type or op that
/// symm cannot run here.
pub(crate) fn unsupported(comm: &Comm, message: String) -> symm::Error {
    comm.error(symm::ErrorKind::Unsupported, message)
}

/// A capacity error on `comm`'s rank: a limit of symm's that the call
/// passes (the 2^32 - 1 elements its kernels index).
pub(crate) fn capacity(comm: &Comm, message: String) -> symm::Error {
    comm.error(symm::ErrorKind::Capacity, message)
}

/// Whether `stream` is capturing a CUDA graph (`None`: the emulator's,
/// which never does; a status the driver will not give counts as not).
pub(crate) fn capturing(stream: Option<&symm::cudarc::driver::CudaStream>) -> bool {
    use symm::cudarc::driver::sys::CUstreamCaptureStatus as S;
    stream
        .and_then(|s| s.capture_status().ok())
        .is_some_and(|st| st != S::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// A problem unless the rank may still run collectives: after a kernel
/// failed, its call counters may be out of step with its peers'.
pub(crate) fn usable(comm: &Comm) -> Result<(), Problem> {
    if comm.kernel_failed() {
        Err(
            "a kernel on this rank failed earlier (see the error it reported); its call \
             counters may be out of step with its peers', so collectives no longer run on \
             this group; make a new group"
                .into(),
        )
    } else {
        Ok(())
    }
}

/// A problem unless `n` elements of `T` fit this rank's buffer of `input`
/// (`what` names it) and index in `u32` (past that, a capacity problem).
pub(crate) fn fits<T: Element>(
    input: &SymmetricMemory,
    n: usize,
    what: &str,
) -> Result<(), Problem> {
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    if n > cap || n > u32::MAX as usize {
        Err(Problem::too_many(
            Some(n),
            format!("{n} elements, and {what} holds {cap} (and at most 2^32 - 1 can move)"),
        ))
    } else {
        Ok(())
    }
}

/// Whether every rank's buffer of `input` starts 16-byte aligned (they
/// all lie alike past a boundary: their allocations are aligned, and a
/// view's offset is the same on every rank).
pub(crate) fn vector_aligned(input: &SymmetricMemory) -> bool {
    input.buffer_ptrs()[input.rank()].is_multiple_of(16)
}

/// Whether two of a coalesced call's non-empty `ranges` share an element
/// (which one domain's kernel and the packing across domains refuse alike).
pub(crate) fn ranges_overlap(ranges: &[std::ops::Range<usize>]) -> bool {
    let mut sorted: Vec<_> = ranges.iter().filter(|r| !r.is_empty()).collect();
    sorted.sort_by_key(|r| r.start);
    sorted.windows(2).any(|w| w[1].start < w[0].end)
}

/// Why `root` cannot be the root of a call on `world` ranks, if it cannot.
pub(crate) fn root_problem(root: usize, world: usize) -> Option<String> {
    (root >= world).then(|| format!("root {root} is not a rank of {world}"))
}

/// A problem unless `out` is aligned to its elements and holds `need`
/// elements (`what` says what they are; `None`: more than `usize`
/// counts). Any element offset works: the kernels store 16-byte vectors
/// where the output reaches a 16-byte boundary, single elements elsewhere.
pub(crate) fn out_fits<T: Element>(
    out: &BoundSlice<'_, T>,
    need: Option<usize>,
    what: &str,
) -> Result<(), Problem> {
    let size = std::mem::size_of::<T>() as u64;
    if !out.device_ptr().is_multiple_of(size) {
        return Err(format!(
            "the output at {:#x} is not aligned to its {size}-byte elements",
            out.device_ptr()
        )
        .into());
    }
    let text = || {
        format!(
            "the output holds {} elements, fewer than {what} ({})",
            out.len(),
            need.map_or("more than 2^64".into(), |k| k.to_string())
        )
    };
    match need {
        Some(k) if k <= out.len() && k <= u32::MAX as usize => Ok(()),
        // More than the kernels index: symm's limit, whatever the output.
        None => Err(Problem::capacity(text())),
        Some(k) if k > u32::MAX as usize => Err(Problem::capacity(format!(
            "{what} is {k} elements, and at most 2^32 - 1 can move"
        ))),
        Some(_) => Err(text().into()),
    }
}

/// Whether `b` overlaps this rank's buffer of `input`, which peers read
/// while this rank writes.
pub(crate) fn overlaps_input<T: Element>(input: &SymmetricMemory, b: &BoundSlice<'_, T>) -> bool {
    let base = input.buffer_ptrs()[input.rank()];
    let end = base + input.buffer_size() as u64;
    let p = b.device_ptr();
    let p_end = p + (b.len() * std::mem::size_of::<T>()) as u64;
    p < end && base < p_end
}

/// Whether `out` starts exactly at this rank's buffer of `input` (in
/// place).
pub(crate) fn is_input<T: Element>(input: &SymmetricMemory, out: &BoundSlice<'_, T>) -> bool {
    out.device_ptr() == input.buffer_ptrs()[input.rank()]
}

/// How a call whose output overlaps its input can run in place, for the
/// overlap error's advice (a call without an in-place form must not
/// suggest one).
#[derive(Clone, Copy)]
pub(crate) enum InPlace {
    /// The call has no in-place form.
    No,
    /// The call's in-place form, as the advice says it ("call `…`").
    Form(&'static str),
    /// The call runs in place when its output is exactly this rank's
    /// buffer of the input ([`same_or_disjoint`]), as does this function,
    /// if it has one.
    SameBuffer(Option<&'static str>),
}

/// A problem if `out` overlaps this rank's buffer of `input`: peers read
/// the input while this rank writes its output. The text says how the
/// call can run in place, if it can.
pub(crate) fn disjoint<T: Element>(
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
    in_place: InPlace,
) -> Result<(), Problem> {
    if !overlaps_input(input, out) {
        return Ok(());
    }
    Err(format!(
        "the output overlaps the symmetric input, which peers read while this rank writes \
         ({})",
        in_place_advice(in_place)
    )
    .into())
}

/// [`disjoint`] for a call whose root alone writes (reduce, gather): the
/// root reads its own input as it writes its output, and no peer reads
/// the root's input while it writes, so the advice differs.
pub(crate) fn root_disjoint<T: Element>(
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
) -> Result<(), Problem> {
    if !overlaps_input(input, out) {
        return Ok(());
    }
    Err(
        "the root's output overlaps its symmetric input, which its kernel reads as it \
         writes the output: give the output memory of its own"
            .to_string()
            .into(),
    )
}

/// What an overlap error advises, by how the call can run in place.
pub(crate) fn in_place_advice(in_place: InPlace) -> String {
    match in_place {
        InPlace::No => "this call has no in-place form: give the output memory of its own".into(),
        InPlace::Form(how) => format!("to run in place, {how}"),
        InPlace::SameBuffer(f) => format!(
            "to run in place, pass this rank's buffer of the input itself as the output, from \
             its first element{}",
            f.map(|f| format!(", or call `{f}`")).unwrap_or_default()
        ),
    }
}

/// [`disjoint`], but `out` may also be exactly this rank's buffer of
/// `input` (in place, where the call's kernels allow it); `in_place` is
/// the call's in-place function, if it has one, which the error names.
pub(crate) fn same_or_disjoint<T: Element>(
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
    in_place: Option<&'static str>,
) -> Result<(), Problem> {
    if is_input(input, out) {
        Ok(())
    } else {
        disjoint(input, out, InPlace::SameBuffer(in_place))
    }
}
