/* The signal protocol: slot addressing, the timeout record, and put/wait on
   self-resetting slots, written once for every kernel that signals. Part
   of DSL_SUPPORT; see symm.cuh. */
#ifndef SYMM_IMPL_SIGNAL_CUH
#define SYMM_IMPL_SIGNAL_CUH

static __device__ __forceinline__ __attribute__((unused)) symm_u32 symm_signal_slot(symm_u32 channel, symm_u32 block, symm_u32 peer) {
    return (channel * SYMM_SIGNAL_BLOCKS + block) * SYMM_MAX_WORLD + peer;
}

static __device__ __forceinline__ __attribute__((unused)) symm_u32* symm_slot(symm_u64 pad, symm_u32 channel, symm_u32 block, symm_u32 peer) {
    return ((symm_u32*)pad) + symm_signal_slot(channel, block, peer);
}

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

static __device__ __attribute__((unused)) void symm_record_out_of_bounds(symm_u32* status, symm_u32 rank, symm_u64 index, bool negative,
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

/* Returns 1 on success, 0 after recording a timeout. */
static __device__ __attribute__((unused)) int symm_put(const symm_u64* pads, symm_u32 rank, symm_u32 dst, symm_u32 channel,
                               symm_u64 timeout_ns, symm_u32 timeout_ms, symm_u32* status, symm_u32 kind) {
    symm_u32* slot = symm_slot(pads[dst], channel, blockIdx.x, rank);
    symm_u64 start = symm_globaltimer();
    symm_fence_acq_rel_sys();
    while (symm_atom_cas_release_sys_u32(slot, 0u, 1u) != 0u) {
        if (symm_globaltimer() - start > timeout_ns) {
            symm_record_timeout(status, kind, rank, dst, channel, timeout_ms);
            return 0;
        }
    }
    return 1;
}

static __device__ __attribute__((unused)) int symm_wait(const symm_u64* pads, symm_u32 rank, symm_u32 src, symm_u32 channel,
                                symm_u64 timeout_ns, symm_u32 timeout_ms, symm_u32* status, symm_u32 kind) {
    symm_u32* slot = symm_slot(pads[rank], channel, blockIdx.x, src);
    symm_u64 start = symm_globaltimer();
    while (symm_atom_cas_acquire_sys_u32(slot, 1u, 0u) != 1u) {
        if (symm_globaltimer() - start > timeout_ns) {
            symm_record_timeout(status, kind, rank, src, channel, timeout_ms);
            return 0;
        }
    }
    return 1;
}

#endif /* SYMM_IMPL_SIGNAL_CUH */
