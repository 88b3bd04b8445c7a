/* What the signal protocol stands on: the status record's writers and a
   wait's give-up check. Put, wait and the epoch flags
   themselves are DSL device functions (symm-runtime/src/dsl/protocol.rs),
   one source for the GPU and the emulator. Part of DSL_SUPPORT; see
   symm.cuh. */
#ifndef SYMM_IMPL_SIGNAL_CUH
#define SYMM_IMPL_SIGNAL_CUH

static __device__ __attribute__((unused)) void symm_record_timeout(symm_u32* status, symm_u32 kind, symm_u32 rank, symm_u32 peer,
                                           symm_u32 channel, symm_u32 timeout_ms) {
    /* Claim with 2 ("being written"), fill, then publish 1 with release, so
       a reader that sees 1 sees the whole record. The first failure wins. */
    if (symm_atom_cas_acq_rel_sys_u32(status, 0u, 2u) == 0u) {
        status[1] = kind; status[2] = rank; status[3] = blockIdx.x; status[4] = peer;
        status[5] = channel; status[6] = threadIdx.x; status[7] = timeout_ms;
        symm_st_release_sys_u32(status, 1u);
    }
}

/* Whether the host has stopped this rank's waits on `peer`: bit `peer` of
   the status record's abort words, which the host sets when `peer` exits
   (every bit when a rank fails). Read only once a wait has spun
   SYMM_ABORT_POLL_NS, so a wait that ends sooner never loads it. */
static __device__ __forceinline__ __attribute__((unused)) bool symm_wait_aborted(const symm_u32* status, symm_u32 peer, symm_u64 waited) {
    return waited > SYMM_ABORT_POLL_NS
        && peer < SYMM_MAX_DOMAIN
        && ((symm_ld<SYMM_VOLATILE, SYMM_SYS>(status + SYMM_ABORT_WORD + (peer >> 5u)) >> (peer & 31u)) & 1u) != 0u;
}

/* A wait's give-up check, on each turn of its loop: past `timeout_ns` it
   records a timeout of `kind`, and once the host stopped waits on `peer`
   (symm_wait_aborted) it records SYMM_KIND_ABORTED; either way it returns
   true, and the caller ends the thread. */
static __device__ __forceinline__ __attribute__((unused)) bool symm_wait_gives_up(symm_u32* status, symm_u64 start, symm_u64 timeout_ns,
                                                                              symm_u32 kind, symm_u32 rank, symm_u32 peer, symm_u32 channel) {
    const symm_u64 waited = symm_globaltimer() - start;
    if (waited > timeout_ns) {
        symm_record_timeout(status, kind, rank, peer, channel, (symm_u32)(timeout_ns / 1000000ull));
        return true;
    }
    if (symm_wait_aborted(status, peer, waited)) {
        symm_record_timeout(status, SYMM_KIND_ABORTED, rank, peer, channel, (symm_u32)(timeout_ns / 1000000ull));
        return true;
    }
    return false;
}

static __device__ __noinline__ __attribute__((unused)) void symm_record_out_of_bounds(symm_u32* status, symm_u32 rank, symm_u64 index, bool negative,
                                                 symm_u64 len, symm_u32 fn, symm_u32 line) {
    /* Claimed and published as a timeout is (one protocol, so whichever
       failure comes first wins). */
    if (symm_atom_cas_acq_rel_sys_u32(status, 0u, 2u) == 0u) {
        status[1] = SYMM_KIND_OUT_OF_BOUNDS; status[2] = rank;
        status[3] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        status[4] = SYMM_KERNEL_ID; status[5] = fn;
        status[6] = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        status[7] = line;
        status[8] = (symm_u32)index; status[9] = (symm_u32)(index >> 32);
        status[10] = (symm_u32)len; status[11] = (symm_u32)(len >> 32);
        status[12] = negative ? 1u : 0u;
        symm_st_release_sys_u32(status, 1u);
    }
}

static __device__ __attribute__((unused)) void symm_record_mismatch(symm_u32* status, symm_u32 rank, symm_u32 peer) {
    /* Claimed and published as a timeout is. */
    if (symm_atom_cas_acq_rel_sys_u32(status, 0u, 2u) == 0u) {
        status[1] = SYMM_KIND_MISMATCH; status[2] = rank;
        status[3] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        status[4] = SYMM_KERNEL_ID; status[5] = peer;
        status[6] = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        symm_st_release_sys_u32(status, 1u);
    }
}

static __device__ __attribute__((unused)) void symm_record_assert(symm_u32* status, symm_u32 rank, symm_u32 fn, symm_u32 index) {
    /* Claimed and published as a timeout is. */
    if (symm_atom_cas_acq_rel_sys_u32(status, 0u, 2u) == 0u) {
        status[1] = SYMM_KIND_ASSERT; status[2] = rank;
        status[3] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        status[4] = SYMM_KERNEL_ID; status[5] = fn;
        status[6] = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        status[7] = index;
        symm_st_release_sys_u32(status, 1u);
    }
}

#endif /* SYMM_IMPL_SIGNAL_CUH */
