#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
mod divergent_warp {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "divergent_warp" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private_0_1_0 :: DeviceFn > {
        :: std :: vec![&thread_idx_x :: DEVICE , &ballot :: DEVICE , &shfl_xor :: DEVICE]
    }
    fn __key () -> :: std :: vec :: Vec < :: std :: string :: String > {
        :: std :: vec![]
    }
    #[doc = r" The complete CUDA C of these generic arguments, exporting `__entry`."]
    #[doc (hidden)]
    pub fn __source (__entry : &str) -> :: std :: string :: String {
        let mut __w = WRAPPER . replace ("$ENTRY$" , __entry) ;
        :: symm :: __private_0_1_0 :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for () -> :: std :: string :: String {
        __source (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel), as"]
    #[doc = r" [`launch_unchecked`] runs it: indices unchecked."]
    pub fn compile_for (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > {
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , false , &| __e | __source (__e) , arch)
    }
    #[doc = r" [`compile_for`], as [`launch`] runs the kernel: every index"]
    #[doc = r" bounds-checked."]
    pub fn compile_checked_for (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > {
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , true , &| __e | __source (__e) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 5usize ;
    #[doc = r" The file that defines the kernel."]
    pub const FILE : &str = :: core :: file!() ;
    #[doc = r" The line of the kernel's name in [`FILE`]."]
    pub const LINE : u32 = :: core :: line!() ;
    #[doc = r" The kernel as the runtime knows it."]
    #[doc (hidden)]
    pub static DEF : :: symm :: __private_0_1_0 :: KernelDef = :: symm :: __private_0_1_0 :: KernelDef :: new (NAME , false , FILE , LINE , __deps , PARAM_SLOTS) ;
    #[doc = r" The largest grid of this kernel, with `block` threads and"]
    #[doc = r" `shared_mem` bytes of dynamic shared memory per block, that"]
    #[doc = r" `comm` may [`launch`] so that the kernels of ranks sharing a"]
    #[doc = r" GPU are resident together (`None`: any grid, as when every"]
    #[doc = r" rank has its own GPU). Compiles the kernel if it is not yet."]
    pub fn co_resident_grid (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> {
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , true , block , shared_mem , &| __e | __source (__e))
    }
    #[doc = r" [`co_resident_grid`] for [`launch_unchecked`], whose"]
    #[doc = r" instantiation (without bounds checks) may fit more blocks."]
    pub fn co_resident_grid_unchecked (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> {
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , false , block , shared_mem , &| __e | __source (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here. The"]
    #[doc = r" kernel's indexing (`x[i]`) is bounds-checked on the GPU too:"]
    #[doc = r" the first index out of bounds is reported by the next"]
    #[doc = r" synchronisation as [`Error::KernelFault`](::symm::Error::KernelFault)"]
    #[doc = r" (naming the rank, block, thread, index, length and source"]
    #[doc = r" line), and nothing out of bounds is read or written there."]
    pub fn launch (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , out : &mut (impl :: symm :: DeviceSlice < u32 > + ? Sized)) -> :: symm :: Result < () > {
        unsafe {
            __launch (true , comm , cfg , out)
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
    pub unsafe fn launch_unchecked (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , out : &mut (impl :: symm :: DeviceSlice < u32 > + ? Sized)) -> :: symm :: Result < () > {
        unsafe {
            __launch (false , comm , cfg , out)
        }
    }
    #[doc = r" Packs the arguments and launches, checked or not."]
    #[doc = r""]
    #[doc = r" # Safety"]
    #[doc = r""]
    #[doc = r" Unless `__checked`, as [`launch_unchecked`]."]
    unsafe fn __launch (__checked : bool , comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , out : &mut (impl :: symm :: DeviceSlice < u32 > + ? Sized)) -> :: symm :: Result < () > {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private_0_1_0 :: HIDDEN_SLOTS ;
        let (__ptr , __len) = :: symm :: __private_0_1_0 :: slice_arg :: < u32 , _ > (comm , "out" , &* out) ? ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot_u64 (__ptr) ;
        __p [__k + 1] = :: symm :: __private_0_1_0 :: slot_u64 (__len as u64) ;
        __k += 2 ;
        let __a_out = unsafe {
            :: symm :: dsl :: SliceMut :: < u32 > :: __new (__ptr , __len)
        }
        ;
        let _ = __k ;
        let __key = __key () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        let __src = | __e : &str | __source (__e) ;
        let __cpu = || cpu (__a_out) ;
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
    pub fn cpu (out : :: symm :: dsl :: SliceMut < u32 >) {
        #[allow (unused_imports)]
        use :: symm :: __private_0_1_0 :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        let t = thread_idx_x () ;
        if t < 16 {
            (out) . __dsl_set (t , ballot (true)) ;
        }
        else {
            (out) . __dsl_set (t , shfl_xor (t , 1)) ;
        }
    }
}
