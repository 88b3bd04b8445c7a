//! The element-type tables: the one list of the types each family of
//! built-ins takes, from which every dispatch (trait impls over kernel
//! instantiations) is generated. A new element type joins a list here,
//! and every family that takes that kind of type gets it.
//!
//! Each table is a macro that calls back the macro it is given with the
//! list, `float_types!(m)` expanding to `m!(f32, bf16, ...)`; the callback
//! makes one impl per type. Vector widths follow from the type's size
//! ([`vector`], [`packet`]), so the lists hold types only.

/// The floating-point types every reduction takes (combined in f32): f32,
/// bf16, f16 and the two fp8 types.
macro_rules! float_types {
    ($m:ident) => {
        $m!(
            f32,
            symm::dsl::bf16,
            symm::dsl::f16,
            symm::dsl::f8e4m3,
            symm::dsl::f8e5m2
        );
    };
}
pub(crate) use float_types;

/// The types that reduce in their own type (the reductions' `NATIVE`
/// kernels): the integers of 32 and 64 bits and f64, by every op NCCL has
/// for them (sum, min, max, product; avg only for f64).
macro_rules! native_types {
    ($m:ident) => {
        $m!(f64, u32, u64, i32, i64);
    };
}
pub(crate) use native_types;

/// The float types of at least 16 bits (the fused kernels', whose vectors
/// hold whole rows of `hidden`): f32, bf16 and f16.
macro_rules! wide_float_types {
    ($m:ident) => {
        $m!(f32, symm::dsl::bf16, symm::dsl::f16);
    };
}
pub(crate) use wide_float_types;

/// Every element type the copies move bit for bit: the float types, the
/// native ones and u8.
macro_rules! copy_types {
    ($m:ident) => {
        $crate::shared::elem::float_types!($m);
        $crate::shared::elem::native_types!($m);
        $m!(u8);
    };
}
pub(crate) use copy_types;

/// Elements of `T` in one 16-byte vector (the width every vector kernel
/// loads and stores per thread).
pub(crate) const fn vector<T>() -> usize {
    16 / std::mem::size_of::<T>()
}

/// Elements of `T` in the 4 data bytes of one all-reduce LL packet.
pub(crate) const fn packet<T>() -> usize {
    4 / std::mem::size_of::<T>()
}

/// Elements of `T` in the 8 data bytes of one collectives LL packet.
pub(crate) const fn wide_packet<T>() -> usize {
    8 / std::mem::size_of::<T>()
}
