/* Type traits and array helpers. No <type_traits> without headers, so the
   few traits the templates need are written out here (in symm_detail, not
   part of the contract). Part of PRELUDE; see symm_core.cuh. */
#ifndef SYMM_IMPL_TYPES_CUH
#define SYMM_IMPL_TYPES_CUH

/* ---- Type traits (no <type_traits> without headers) ---- */

namespace symm_detail {
template<typename A, typename B> struct same_t { static constexpr bool value = false; };
template<typename A> struct same_t<A, A> { static constexpr bool value = true; };
template<typename A, typename B> inline constexpr bool same = same_t<A, B>::value;

/* Integer types other than bool, whatever their spelling (size_t included). */
template<typename T> struct int_t { static constexpr bool value = false; };
template<> struct int_t<char> { static constexpr bool value = true; };
template<> struct int_t<signed char> { static constexpr bool value = true; };
template<> struct int_t<unsigned char> { static constexpr bool value = true; };
template<> struct int_t<short> { static constexpr bool value = true; };
template<> struct int_t<unsigned short> { static constexpr bool value = true; };
template<> struct int_t<int> { static constexpr bool value = true; };
template<> struct int_t<unsigned int> { static constexpr bool value = true; };
template<> struct int_t<long> { static constexpr bool value = true; };
template<> struct int_t<unsigned long> { static constexpr bool value = true; };
template<> struct int_t<long long> { static constexpr bool value = true; };
template<> struct int_t<unsigned long long> { static constexpr bool value = true; };
template<typename T> inline constexpr bool is_int = int_t<T>::value;
template<typename T, bool = int_t<T>::value> struct signed_t { static constexpr bool value = false; };
template<typename T> struct signed_t<T, true> { static constexpr bool value = (T)(-1) < (T)0; };
template<typename T> inline constexpr bool is_signed_int = signed_t<T>::value;
template<typename T> inline constexpr bool is_float = same<T, float> || same<T, double>;
template<typename T> inline constexpr bool is_half = same<T, symm_bf16> || same<T, symm_f16>;
template<typename T> inline constexpr bool is_f8 = same<T, symm_f8e4m3> || same<T, symm_f8e5m2>;
template<typename T> inline constexpr bool is_numeric =
    same<T, bool> || is_int<T> || is_float<T> || is_half<T> || is_f8<T>;
/* For static_assert in an `if constexpr` branch that must not be taken. */
template<typename T> inline constexpr bool always_false = false;
} /* namespace symm_detail */

/* ---- Fixed-size array helpers ---- */

template<typename T, symm_u64 N> __device__ __forceinline__ symm_array<T, N> symm_array_fill(T x) {
    symm_array<T, N> r;
    for (symm_u64 i = 0; i < N; ++i) {
        r.v[i] = x;
    }
    return r;
}

#endif /* SYMM_IMPL_TYPES_CUH */
