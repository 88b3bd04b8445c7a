#[doc = " Every warp shuffle in a chain, for a type: each is an intrinsic with its"]
#[doc = " own CUDA C, and literal lane arguments stay bare `u32`s."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
mod all_shuffles {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "all_shuffles" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private :: DeviceFn > {
        :: std :: vec![&thread_idx_x :: DEVICE , &shfl_xor :: DEVICE , &shfl_down :: DEVICE , &shfl_up :: DEVICE , &shfl_idx :: DEVICE]
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
    pub const PARAM_SLOTS : usize = 7usize ;
    #[doc = r" The kernel as the runtime knows it."]
    #[doc (hidden)]
    pub static DEF : :: symm :: __private :: KernelDef = :: symm :: __private :: KernelDef :: new (NAME , false) ;
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
    pub fn launch < T : Scalar > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , x : &(impl :: symm :: DeviceSlice < T > + ? Sized) , y : &mut (impl :: symm :: DeviceSlice < T > + ? Sized)) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private :: HIDDEN_SLOTS ;
        let (__ptr , __len) = :: symm :: __private :: slice_arg :: < T , _ > (comm , "x" , &* x) ? ;
        __p [__k] = :: symm :: __private :: slot_u64 (__ptr) ;
        __p [__k + 1] = :: symm :: __private :: slot_u64 (__len as u64) ;
        __k += 2 ;
        let __a_x = unsafe {
            :: symm :: dsl :: Slice :: < T > :: __new (__ptr , __len)
        }
        ;
        let (__ptr , __len) = :: symm :: __private :: slice_arg :: < T , _ > (comm , "y" , &* y) ? ;
        __p [__k] = :: symm :: __private :: slot_u64 (__ptr) ;
        __p [__k + 1] = :: symm :: __private :: slot_u64 (__len as u64) ;
        __k += 2 ;
        let __a_y = unsafe {
            :: symm :: dsl :: SliceMut :: < T > :: __new (__ptr , __len)
        }
        ;
        let _ = __k ;
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . launch (comm , &__key , cfg , &mut __p , &| __e | __source :: < T > (__e) , &|| cpu :: < T > (__a_x , __a_y))
    }
    #[doc = r" The kernel body as Rust, for the CPU emulator."]
    #[allow (unused_mut , unused_variables , unused_parens , unused_braces)]
    pub fn cpu < T : Scalar > (x : :: symm :: dsl :: Slice < T > , y : :: symm :: dsl :: SliceMut < T >) where T : :: symm :: dsl :: Scalar {
        #[allow (unused_imports)]
        use :: symm :: __private :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        let i = thread_idx_x () ;
        let a = shfl_xor ((x) . __dsl_get (i) , 1) ;
        let b = shfl_down (a , 2) ;
        let c = shfl_up (b , 3) ;
        (y) . __dsl_set (i , shfl_idx (c , 4)) ;
    }
}
