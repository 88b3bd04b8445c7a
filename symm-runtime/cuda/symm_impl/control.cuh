/* Timers, launch control and warp primitives. Part of PRELUDE; see
   symm_core.cuh. */
#ifndef SYMM_IMPL_CONTROL_CUH
#define SYMM_IMPL_CONTROL_CUH

/* Nanoseconds of the global timer, comparable across SMs of one GPU. */
SYMM_DEVICE_FN symm_u64 symm_globaltimer() {
    symm_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : : "memory");
    return t;
}

/* Programmatic dependent launch (sm_90+; nothing to wait for before): wait
   until the previous grid on the stream has finished and its memory is
   visible, and let the next grid start launching. */
SYMM_DEVICE_FN void symm_grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

SYMM_DEVICE_FN void symm_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
#endif
}

/* Backoff for spin loops on a flag. */
SYMM_DEVICE_FN void symm_nanosleep(symm_u32 ns) {
    asm volatile("nanosleep.u32 %0;" : : "r"(ns) : "memory");
}

/* ---- Warp primitives (whole warp converged: member mask 0xffffffff) ---- */

namespace symm_detail {
SYMM_DEVICE_FN symm_u32 shfl_bfly(symm_u32 x, symm_u32 lane_mask) {
    symm_u32 r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=r"(r) : "r"(x), "r"(lane_mask));
    return r;
}
} /* namespace symm_detail */

/* The value of v held by lane (lane_id ^ lane_mask). T of 1, 2, 4 or 8
   bytes (narrow values travel widened to 32 bits, 8 bytes as two halves). */
template<typename T> __device__ __forceinline__ T symm_shfl_xor(T v, symm_u32 lane_mask) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "symm_shfl_xor: T must have 1, 2, 4 or 8 bytes");
    if constexpr (sizeof(T) == 8) {
        symm_array<symm_u32, 2> w = symm_bitcast<symm_array<symm_u32, 2>>(v);
        w.v[0] = symm_detail::shfl_bfly(w.v[0], lane_mask);
        w.v[1] = symm_detail::shfl_bfly(w.v[1], lane_mask);
        return symm_bitcast<T>(w);
    } else if constexpr (sizeof(T) == 4) {
        return symm_bitcast<T>(symm_detail::shfl_bfly(symm_bitcast<symm_u32>(v), lane_mask));
    } else if constexpr (sizeof(T) == 2) {
        symm_u32 w = symm_bitcast<symm_u16>(v);
        return symm_bitcast<T>((symm_u16)symm_detail::shfl_bfly(w, lane_mask));
    } else {
        symm_u32 w = symm_bitcast<symm_u8>(v);
        return symm_bitcast<T>((symm_u8)symm_detail::shfl_bfly(w, lane_mask));
    }
}

/* Bit i set iff lane i's pred is true. */
SYMM_DEVICE_FN symm_u32 symm_ballot(bool pred) {
    symm_u32 r;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "setp.ne.u32 p, %1, 0;\n\t"
                 "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t}"
                 : "=r"(r) : "r"((symm_u32)pred));
    return r;
}

/* This thread's lane in its warp, 0..31. */
SYMM_DEVICE_FN symm_u32 symm_lane_id() {
    symm_u32 r;
    asm("mov.u32 %0, %%laneid;" : "=r"(r));
    return r;
}

#endif /* SYMM_IMPL_CONTROL_CUH */
