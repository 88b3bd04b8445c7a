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

/* The shuffles are intrinsics (symm::dsl::shfl_xor and its kin), defined
   with their Rust stubs in symm-runtime/src/dsl/intrinsics.rs. */

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
