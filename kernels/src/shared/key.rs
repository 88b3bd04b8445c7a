//! Typed call keys. A family describes its calls as a Rust type (an enum
//! of its call kinds, or a struct): `#[derive(Hash)]` gives the stable
//! hash that ranks compare, and `Display` the words an error shows, both
//! from the one definition, so no rank ever reads a peer's call back
//! from numbers by position.

use std::fmt::Display;
use std::hash::{Hash, Hasher};

/// One call of a family, as the ranks agree on it.
pub(crate) trait CallKey: Hash + Display {
    /// The family, hashed first, so that keys of two families never compare
    /// equal, whatever their fields.
    const FAMILY: &'static str;

    /// The call's name in errors (`all_gather`, `all_reduce`, ...).
    fn name(&self) -> &'static str;

    /// The key's hash: the same on every rank and process of one build
    /// (`derive(Hash)` feeds it; integers of every width are hashed as 8
    /// little-endian bytes, but how std hashes enums and strings may change
    /// between Rust releases, so a group runs one build: `agree` says so
    /// when ranks whose keys read alike hash them differently).
    fn hash64(&self) -> u64 {
        let mut h = Fnv64::default();
        Self::FAMILY.hash(&mut h);
        self.hash(&mut h);
        h.finish()
    }
}

/// FNV-1a over 64 bits: seedless, so every rank and process hashes alike
/// (std's `RandomState` does not, and `DefaultHasher` promises nothing
/// across Rust releases).
pub(crate) struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv64 {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }

    // Fixed widths, so that a key hashes alike on hosts of any pointer
    // width.
    fn write_usize(&mut self, i: usize) {
        self.write(&(i as u64).to_le_bytes());
    }

    fn write_isize(&mut self, i: isize) {
        self.write(&(i as i64).to_le_bytes());
    }
}

/// The digest a kernel compares across ranks: FNV-1a (32 bits) over
/// `words`, the same on every rank and build.
pub(crate) fn digest<'a>(words: impl IntoIterator<Item = &'a u64>) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// The digest of a key (by its hash, which [`agree`](super::agree::agree)
/// returns) made by the call on this rank's `input` (its
/// allocation and offset): ranks that agreed on a key but pass different
/// symmetric buffers would read each other's wrong memory, and fail
/// instead, with no exchange per new buffer.
pub(crate) fn call_digest(key_hash: u64, input: &symm::SymmetricMemory) -> u32 {
    digest(&[key_hash, input.alloc_id(), input.buffer_offset()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Hash)]
    struct A(u64);
    #[derive(Hash)]
    struct B(u64);
    macro_rules! key {
        ($t:ident, $f:literal) => {
            impl Display for $t {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    write!(f, "{}", self.0)
                }
            }
            impl CallKey for $t {
                const FAMILY: &'static str = $f;
                fn name(&self) -> &'static str {
                    $f
                }
            }
        };
    }
    key!(A, "a");
    key!(B, "b");

    #[test]
    fn families_and_fields_separate_keys() {
        assert_ne!(A(1).hash64(), B(1).hash64());
        assert_ne!(A(1).hash64(), A(2).hash64());
        assert_eq!(A(7).hash64(), A(7).hash64());
        // A fixed value: the hash must not depend on the process.
        let mut h = Fnv64::default();
        h.write(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
    }
}
