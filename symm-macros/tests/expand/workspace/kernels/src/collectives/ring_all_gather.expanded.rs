#[doc = " Ring all-gather in place: rank r's chunk `r` (elements `r * chunk .."]
#[doc = " (r + 1) * chunk` of its buffer) reaches the same place in every rank's"]
#[doc = " buffer after `world - 1` steps. Each step forwards the chunk received in"]
#[doc = " the previous one to the next rank and signals it; block b of every rank"]
#[doc = " handles the same elements, so per-block signals (on `channel`) are all"]
#[doc = " the ordering needed. Any grid up to 128 blocks. It does not synchronise"]
#[doc = " on entry: a rank writes into its neighbour as soon as it starts, so"]
#[doc = " before reusing the buffer, make sure every rank is done with it (a host"]
#[doc = " `barrier`)."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
pub mod ring_all_gather {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "ring_all_gather" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private :: DeviceFn > {
        :: std :: vec![&grid_dim_x :: DEVICE , &block_dim_x :: DEVICE , &block_idx_x :: DEVICE , &thread_idx_x :: DEVICE , &sync_threads :: DEVICE]
    }
    fn __key < T : Scalar > () -> :: std :: vec :: Vec < :: std :: string :: String > where T : :: symm :: dsl :: Scalar {
        :: std :: vec![< T as :: symm :: dsl :: Scalar > :: CUDA . to_string ()]
    }
    #[doc = r" The complete CUDA C of these generic arguments, exporting `__entry`."]
    #[doc (hidden)]
    pub fn __source < T : Scalar > (__entry : &str) -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        let mut __w = WRAPPER . replace ("$ENTRY$" , __entry) ;
        __w = __w . replace ("$G_T$" , < T as :: symm :: dsl :: Scalar > :: CUDA) ;
        :: symm :: __private :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for < T : Scalar > () -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        __source :: < T > (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel)."]
    pub fn compile_for < T : Scalar > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        :: symm :: __private :: compile_check (NAME , &__source :: < T > (NAME) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 12usize ;
    #[doc = r" The kernel as the runtime knows it."]
    #[doc (hidden)]
    pub static DEF : :: symm :: __private :: KernelDef = :: symm :: __private :: KernelDef :: new (NAME , true) ;
    #[doc = r" The largest grid of this kernel, with `block` threads and"]
    #[doc = r" `shared_mem` bytes of dynamic shared memory per block, that"]
    #[doc = r" `comm` may launch so that the kernels of ranks sharing a GPU"]
    #[doc = r" are resident together (`None`: any grid, as when every rank"]
    #[doc = r" has its own GPU). Compiles the kernel if it is not yet."]
    pub fn co_resident_grid < T : Scalar > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , block , shared_mem , &| __e | __source :: < T > (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here."]
    pub fn launch < T : Scalar > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , buf : &:: symm :: SymmetricMemory , chunk : u32 , channel : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private :: HIDDEN_SLOTS ;
        let __s = :: symm :: __private :: symm_arg :: < T > (comm , "buf" , buf) ? ;
        __p [__k .. __k + :: symm :: __private :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private :: SYMM_BUF_SLOTS ;
        let __a_buf = :: symm :: __private :: symm_handle :: < T > (buf) ;
        __p [__k] = :: symm :: __private :: slot (chunk) ;
        __k += 1 ;
        __p [__k] = :: symm :: __private :: slot (channel) ;
        __k += 1 ;
        let _ = __k ;
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . launch (comm , &__key , cfg , &mut __p , &| __e | __source :: < T > (__e) , &|| cpu :: < T > (__a_buf , chunk , channel))
    }
    #[doc = r" The kernel body as Rust, for the CPU emulator."]
    #[allow (unused_mut , unused_variables , unused_parens , unused_braces)]
    pub fn cpu < T : Scalar > (buf : SymmBuf < T > , chunk : u32 , channel : u32) where T : :: symm :: dsl :: Scalar {
        #[allow (unused_imports)]
        use :: symm :: __private :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        let rank = buf . rank () ;
        let world = buf . world_size () ;
        let next = (rank + 1) % world ;
        let prev = (rank + world - 1) % world ;
        let stride = grid_dim_x () * block_dim_x () ;
        let src = buf . local () ;
        let dst = buf . peer (next) ;
        for step in 0 .. world - 1 {
            let base = ((rank + world - step) % world) * chunk ;
            let mut i = block_idx_x () * block_dim_x () + thread_idx_x () ;
            while i < chunk {
                (dst) . __dsl_set (base + i , (src) . __dsl_get (base + i)) ;
                i += stride ;
            }
            sync_threads () ;
            if thread_idx_x () == 0 {
                buf . put_signal (next , channel) ;
                buf . wait_signal (prev , channel) ;
            }
            sync_threads () ;
        }
    }
}
