#[doc = " Each rank writes `value` into slot `rank` of every rank's buffer."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
pub mod write_slots {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "write_slots" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private :: DeviceFn > {
        :: std :: vec![&thread_idx_x :: DEVICE]
    }
    fn __key () -> :: std :: vec :: Vec < :: std :: string :: String > {
        :: std :: vec![]
    }
    #[doc = r" The complete CUDA C of these generic arguments, exporting `__entry`."]
    #[doc (hidden)]
    pub fn __source (__entry : &str) -> :: std :: string :: String {
        let mut __w = WRAPPER . replace ("$ENTRY$" , __entry) ;
        :: symm :: __private :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for () -> :: std :: string :: String {
        __source (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel)."]
    pub fn compile_for (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > {
        :: symm :: __private :: compile_check (NAME , &__source (NAME) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 11usize ;
    #[doc = r" The kernel as the runtime knows it."]
    #[doc (hidden)]
    pub static DEF : :: symm :: __private :: KernelDef = :: symm :: __private :: KernelDef :: new (NAME , true) ;
    #[doc = r" The largest grid of this kernel, with `block` threads and"]
    #[doc = r" `shared_mem` bytes of dynamic shared memory per block, that"]
    #[doc = r" `comm` may launch so that the kernels of ranks sharing a GPU"]
    #[doc = r" are resident together (`None`: any grid, as when every rank"]
    #[doc = r" has its own GPU). Compiles the kernel if it is not yet."]
    pub fn co_resident_grid (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> {
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , block , shared_mem , &| __e | __source (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here."]
    pub fn launch (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , buf : &:: symm :: SymmetricMemory , value : u32) -> :: symm :: Result < () > {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private :: HIDDEN_SLOTS ;
        let __s = :: symm :: __private :: symm_arg :: < u32 > (comm , "buf" , buf) ? ;
        __p [__k .. __k + :: symm :: __private :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private :: SYMM_BUF_SLOTS ;
        let __a_buf = :: symm :: __private :: symm_handle :: < u32 > (buf) ;
        __p [__k] = :: symm :: __private :: slot (value) ;
        __k += 1 ;
        let _ = __k ;
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . launch (comm , &__key , cfg , &mut __p , &| __e | __source (__e) , &|| cpu (__a_buf , value))
    }
    #[doc = r" The kernel body as Rust, for the CPU emulator."]
    #[allow (unused_mut , unused_variables , unused_parens , unused_braces)]
    pub fn cpu (buf : SymmBuf < u32 > , value : u32) {
        #[allow (unused_imports)]
        use :: symm :: __private :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        let p = thread_idx_x () ;
        if p < buf . world_size () {
            buf . peer (p) . store (buf . rank () , value , StoreOrder :: Relaxed , Scope :: System) ;
        }
    }
}
