#[doc = " One-shot all-reduce of the first `n` elements of `buf` into `out`."]
#[doc = " `V` elements make 16 bytes; `W` is the world size when it is 2, 4 or 8"]
#[doc = " (unrolled), or 0 to read it at run time. Launch with at least"]
#[doc = " `world_size` threads per block and at most 128 blocks; every rank must"]
#[doc = " launch the same grid on the same buffer."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
pub mod one_shot_all_reduce {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "one_shot_all_reduce" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private_0_1_0 :: DeviceFn > {
        :: std :: vec![&enter_call :: DEVICE , &next_epoch :: DEVICE , &epoch_barrier :: DEVICE , &grid_dim_x :: DEVICE , &block_dim_x :: DEVICE , &block_idx_x :: DEVICE , &thread_idx_x :: DEVICE , &sum_peers :: DEVICE , &sync_threads :: DEVICE , &commit_epoch :: DEVICE]
    }
    fn __key < T : Scalar , const V : usize , const W : usize > () -> :: std :: vec :: Vec < :: std :: string :: String > where T : :: symm :: dsl :: Scalar {
        :: std :: vec![< T as :: symm :: dsl :: Scalar > :: CUDA . to_string () , :: std :: format!("{}" , V) , :: std :: format!("{}" , W)]
    }
    #[doc = r" The complete CUDA C of these generic arguments, exporting `__entry`."]
    #[doc (hidden)]
    pub fn __source < T : Scalar , const V : usize , const W : usize > (__entry : &str) -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        let mut __w = WRAPPER . replace ("$ENTRY$" , __entry) ;
        __w = __w . replace ("$G_T$" , < T as :: symm :: dsl :: Scalar > :: CUDA) ;
        __w = __w . replace ("$G_V$" , &:: std :: format!("{}" , V)) ;
        __w = __w . replace ("$G_W$" , &:: std :: format!("{}" , W)) ;
        :: symm :: __private_0_1_0 :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for < T : Scalar , const V : usize , const W : usize > () -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        __source :: < T , V , W > (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel), as"]
    #[doc = r" [`launch_unchecked`] runs it: indices unchecked."]
    pub fn compile_for < T : Scalar , const V : usize , const W : usize > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , false , &| __e | __source :: < T , V , W > (__e) , arch)
    }
    #[doc = r" [`compile_for`], as [`launch`] runs the kernel: every index"]
    #[doc = r" bounds-checked."]
    pub fn compile_checked_for < T : Scalar , const V : usize , const W : usize > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , true , &| __e | __source :: < T , V , W > (__e) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 14usize ;
    #[doc = r" The file that defines the kernel."]
    pub const FILE : &str = :: core :: file!() ;
    #[doc = r" The line of the kernel's name in [`FILE`]."]
    pub const LINE : u32 = :: core :: line!() ;
    #[doc = r" The kernel as the runtime knows it."]
    #[doc (hidden)]
    pub static DEF : :: symm :: __private_0_1_0 :: KernelDef = :: symm :: __private_0_1_0 :: KernelDef :: new (NAME , true , FILE , LINE , __deps , PARAM_SLOTS) ;
    #[doc = r" The largest grid of this kernel, with `block` threads and"]
    #[doc = r" `shared_mem` bytes of dynamic shared memory per block, that"]
    #[doc = r" `comm` may [`launch`] so that the kernels of ranks sharing a"]
    #[doc = r" GPU are resident together (`None`: any grid, as when every"]
    #[doc = r" rank has its own GPU). Compiles the kernel if it is not yet."]
    pub fn co_resident_grid < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , true , block , shared_mem , &| __e | __source :: < T , V , W > (__e))
    }
    #[doc = r" [`co_resident_grid`] for [`launch_unchecked`], whose"]
    #[doc = r" instantiation (without bounds checks) may fit more blocks."]
    pub fn co_resident_grid_unchecked < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , false , block , shared_mem , &| __e | __source :: < T , V , W > (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here. The"]
    #[doc = r" kernel's indexing (`x[i]`) is bounds-checked on the GPU too:"]
    #[doc = r" the first index out of bounds is reported by the next"]
    #[doc = r" synchronisation as [`Error::KernelFault`](::symm::Error::KernelFault)"]
    #[doc = r" (naming the rank, block, thread, index, length and source"]
    #[doc = r" line), and nothing out of bounds is read or written there."]
    pub fn launch < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , buf : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T , V , W > (true , comm , cfg , buf , out , n , ch)
        }
    }
    #[doc = r" [`launch`] without bounds checks on the GPU: the kernel is"]
    #[doc = r" compiled with plain indexing (unless the environment sets"]
    #[doc = r" `SYMM_CHECK_ALL=1`). The CPU emulator checks every index"]
    #[doc = r" either way."]
    #[doc = r""]
    #[doc = r" # Safety"]
    #[doc = r""]
    #[doc = r" Every index the kernel computes from these arguments must be"]
    #[doc = r" in bounds of what it indexes: an index out of bounds reads or"]
    #[doc = r" writes memory the kernel does not own."]
    pub unsafe fn launch_unchecked < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , buf : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T , V , W > (false , comm , cfg , buf , out , n , ch)
        }
    }
    #[doc = r" Packs the arguments and launches, checked or not."]
    #[doc = r""]
    #[doc = r" # Safety"]
    #[doc = r""]
    #[doc = r" Unless `__checked`, as [`launch_unchecked`]."]
    unsafe fn __launch < T : Scalar , const V : usize , const W : usize > (__checked : bool , comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , buf : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private_0_1_0 :: HIDDEN_SLOTS ;
        let __s = :: symm :: __private_0_1_0 :: symm_arg :: < T > (comm , "buf" , buf) ? ;
        __p [__k .. __k + :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS ;
        let __a_buf = unsafe {
            :: symm :: __private_0_1_0 :: symm_handle :: < T > (buf)
        }
        ;
        let (__ptr , __len) = :: symm :: __private_0_1_0 :: slice_arg :: < T , _ > (comm , "out" , &* out) ? ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot_u64 (__ptr) ;
        __p [__k + 1] = :: symm :: __private_0_1_0 :: slot_u64 (__len as u64) ;
        __k += 2 ;
        let __a_out = unsafe {
            :: symm :: dsl :: SliceMut :: < T > :: __new (__ptr , __len)
        }
        ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot (n) ;
        __k += 1 ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot (ch) ;
        __k += 1 ;
        let _ = __k ;
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        let __src = | __e : &str | __source :: < T , V , W > (__e) ;
        let __cpu = || cpu :: < T , V , W > (__a_buf , __a_out , n , ch) ;
        if __checked {
            unsafe {
                DEF . launch (comm , &__key , cfg , &mut __p , &__src , &__cpu)
            }
        }
        else {
            unsafe {
                DEF . launch_unchecked (comm , &__key , cfg , &mut __p , &__src , &__cpu)
            }
        }
    }
    #[doc = r" The kernel body as Rust, for the CPU emulator."]
    #[allow (unused_mut , unused_variables , unused_parens , unused_braces)]
    pub fn cpu < T : Scalar , const V : usize , const W : usize > (buf : SymmBuf < T > , out : :: symm :: dsl :: SliceMut < T > , n : u32 , ch : u32) where T : :: symm :: dsl :: Scalar {
        #[allow (unused_imports)]
        use :: symm :: __private_0_1_0 :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        enter_call () ;
        let rank = buf . rank () ;
        let world = if W > 0 {
            W as u32
        }
        else {
            buf . world_size ()
        }
        ;
        let epoch = next_epoch (buf , ch) ;
        epoch_barrier (buf , ch , epoch) ;
        let stride = grid_dim_x () * block_dim_x () ;
        let first = block_idx_x () * block_dim_x () + thread_idx_x () ;
        let vecs = n / V as u32 ;
        let mut i = first ;
        while i < vecs {
            let res = sum_peers :: < T , V > (buf , i * V as u32 , world) ;
            out . store_vec :: < V > (i * V as u32 , res) ;
            i += stride ;
        }
        let mut j = vecs * V as u32 + first ;
        while j < n {
            let mut acc : f32 = 0.0 ;
            for r in 0 .. world {
                acc += (buf . peer (r)) . __dsl_get (j) . to_f32 () ;
            }
            (out) . __dsl_set (j , T :: from_f32 (acc)) ;
            j += stride ;
        }
        sync_threads () ;
        epoch_barrier (buf , ch + 1 , epoch) ;
        commit_epoch (buf , epoch , ch) ;
    }
}
