//! Atomic access to emulated device memory.
//!
//! Simulated ranks and threads touch the same host memory concurrently, so
//! every access is atomic. Rust forbids racing atomics of different sizes on
//! overlapping bytes, so every access here, whatever its width, is an
//! operation on the aligned `AtomicU64` word that contains it: 8-byte values
//! load and store the word, narrower ones extract or compare-and-swap their
//! bits within it. Emulated allocations are 8-byte aligned and sized in whole
//! words, so the containing word is always in bounds.

use std::sync::atomic::{AtomicU64, Ordering};

fn word(addr: u64) -> &'static AtomicU64 {
    // SAFETY: callers pass addresses inside live emulated allocations, which
    // are 8-byte aligned and whole words long, and every access to that
    // memory goes through this module (so all accesses are 8-byte atomics).
    // The 'static lifetime never outlives the access it is used for.
    unsafe { AtomicU64::from_ptr((addr & !7) as *mut u64) }
}

fn field(addr: u64, size: usize) -> (u32, u64) {
    debug_assert!(
        matches!(size, 1 | 2 | 4 | 8) && addr.is_multiple_of(size as u64),
        "unaligned {size}-byte access at {addr:#x}"
    );
    let shift = ((addr & 7) * 8) as u32;
    let mask = if size == 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    };
    (shift, mask)
}

/// Loads `size` bytes (1, 2, 4 or 8, naturally aligned) at `addr`.
pub(crate) fn load(addr: u64, size: usize, order: Ordering) -> u64 {
    let (shift, mask) = field(addr, size);
    (word(addr).load(order) >> shift) & mask
}

/// Stores the low `size` bytes of `bits` at `addr`.
pub(crate) fn store(addr: u64, size: usize, bits: u64, order: Ordering) {
    if size == 8 {
        return word(addr).store(bits, order);
    }
    let _ = rmw(addr, size, order, |_| Some(bits));
}

/// Read-modify-write of the `size`-byte field at `addr`: `f` maps the old
/// value to the new one, or `None` to leave it. Returns the old value.
pub(crate) fn rmw(addr: u64, size: usize, order: Ordering, f: impl Fn(u64) -> Option<u64>) -> u64 {
    let (shift, mask) = field(addr, size);
    let w = word(addr);
    let mut cur = w.load(Ordering::Relaxed);
    loop {
        let old = (cur >> shift) & mask;
        let Some(new) = f(old) else { return old };
        let next = (cur & !(mask << shift)) | ((new & mask) << shift);
        match w.compare_exchange_weak(cur, next, order, Ordering::Relaxed) {
            Ok(_) => return old,
            Err(c) => cur = c,
        }
    }
}

/// Copies bytes in, word by word where it can.
pub(crate) fn write(dst: u64, src: &[u8]) {
    let mut i = 0usize;
    while i < src.len() {
        let a = dst + i as u64;
        if a.is_multiple_of(8) && src.len() - i >= 8 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&src[i..i + 8]);
            word(a).store(u64::from_le_bytes(b), Ordering::Relaxed);
            i += 8;
        } else {
            store(a, 1, u64::from(src[i]), Ordering::Relaxed);
            i += 1;
        }
    }
    std::sync::atomic::fence(Ordering::Release);
}

/// Copies bytes out, word by word where it can.
pub(crate) fn read(src: u64, dst: &mut [u8]) {
    std::sync::atomic::fence(Ordering::Acquire);
    let mut i = 0usize;
    while i < dst.len() {
        let a = src + i as u64;
        if a.is_multiple_of(8) && dst.len() - i >= 8 {
            dst[i..i + 8].copy_from_slice(&word(a).load(Ordering::Relaxed).to_le_bytes());
            i += 8;
        } else {
            dst[i] = load(a, 1, Ordering::Relaxed) as u8;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_word_fields_do_not_disturb_neighbours() {
        // Atomics (interior mutability) so writing through the raw address is sound.
        let mem: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        let base = mem.as_ptr() as u64;
        store(base + 1, 1, 0xAB, Ordering::Relaxed);
        store(base + 2, 2, 0x1234, Ordering::Relaxed);
        store(base + 4, 4, 0xDEAD_BEEF, Ordering::Relaxed);
        assert_eq!(load(base, 8, Ordering::Relaxed), 0xDEAD_BEEF_1234_AB00);
        assert_eq!(load(base + 2, 2, Ordering::Relaxed), 0x1234);
        assert_eq!(
            rmw(base + 4, 4, Ordering::AcqRel, |v| (v == 0xDEAD_BEEF)
                .then_some(7)),
            0xDEAD_BEEF
        );
        assert_eq!(load(base + 4, 4, Ordering::Relaxed), 7);
        assert_eq!(
            rmw(base + 4, 4, Ordering::AcqRel, |v| (v == 0).then_some(9)),
            7,
            "failed CAS leaves it"
        );
        let src: Vec<u8> = (0..29).collect();
        write(base + 3, &src);
        let mut back = vec![0u8; 29];
        read(base + 3, &mut back);
        assert_eq!(back, src);
        assert_eq!(
            load(base + 1, 1, Ordering::Relaxed),
            0xAB,
            "byte before the copy untouched"
        );
    }
}
