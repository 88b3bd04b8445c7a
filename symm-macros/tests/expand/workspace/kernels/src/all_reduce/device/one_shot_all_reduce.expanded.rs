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
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private :: DeviceFn > {
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
        :: symm :: __private :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for < T : Scalar , const V : usize , const W : usize > () -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        __source :: < T , V , W > (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel)."]
    pub fn compile_for < T : Scalar , const V : usize , const W : usize > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        :: symm :: __private :: compile_check (NAME , &__source :: < T , V , W > (NAME) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 14usize ;
    #[doc = r" The kernel as the runtime knows it."]
    #[doc (hidden)]
    pub static DEF : :: symm :: __private :: KernelDef = :: symm :: __private :: KernelDef :: new (NAME , true) ;
    #[doc = r" The largest grid of this kernel, with `block` threads and"]
    #[doc = r" `shared_mem` bytes of dynamic shared memory per block, that"]
    #[doc = r" `comm` may launch so that the kernels of ranks sharing a GPU"]
    #[doc = r" are resident together (`None`: any grid, as when every rank"]
    #[doc = r" has its own GPU). Compiles the kernel if it is not yet."]
    pub fn co_resident_grid < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , block , shared_mem , &| __e | __source :: < T , V , W > (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here."]
    pub fn launch < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , buf : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private :: HIDDEN_SLOTS ;
        let __s = :: symm :: __private :: symm_arg :: < T > (comm , "buf" , buf) ? ;
        __p [__k .. __k + :: symm :: __private :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private :: SYMM_BUF_SLOTS ;
        let __a_buf = :: symm :: __private :: symm_handle :: < T > (buf) ;
        let (__ptr , __len) = :: symm :: __private :: slice_arg :: < T , _ > (comm , "out" , &* out) ? ;
        __p [__k] = :: symm :: __private :: slot_u64 (__ptr) ;
        __p [__k + 1] = :: symm :: __private :: slot_u64 (__len as u64) ;
        __k += 2 ;
        let __a_out = unsafe {
            :: symm :: dsl :: SliceMut :: < T > :: __new (__ptr , __len)
        }
        ;
        __p [__k] = :: symm :: __private :: slot (n) ;
        __k += 1 ;
        __p [__k] = :: symm :: __private :: slot (ch) ;
        __k += 1 ;
        let _ = __k ;
        let __key = __key :: < T , V , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . launch (comm , &__key , cfg , &mut __p , &| __e | __source :: < T , V , W > (__e) , &|| cpu :: < T , V , W > (__a_buf , __a_out , n , ch))
    }
    #[doc = r" The kernel body as Rust, for the CPU emulator."]
    #[allow (unused_mut , unused_variables , unused_parens , unused_braces)]
    pub fn cpu < T : Scalar , const V : usize , const W : usize > (buf : SymmBuf < T > , out : :: symm :: dsl :: SliceMut < T > , n : u32 , ch : u32) where T : :: symm :: dsl :: Scalar {
        #[allow (unused_imports)]
        use :: symm :: __private :: {
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
