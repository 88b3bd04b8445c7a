#[doc = " All-gather by push: rank r copies `input` (`chunk` elements) to elements"]
#[doc = " `r * chunk ..` of every rank's `out`, its own included. Every rank must"]
#[doc = " launch the same grid (at most 128 blocks of at least `world` threads)."]
#[doc = " `entry` and `exit` are the handshakes' signal channels."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
pub (crate) mod push_all_gather {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "push_all_gather" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private_0_1_0 :: DeviceFn > {
        :: std :: vec![&thread_idx_x :: DEVICE , &sync_threads :: DEVICE , &grid_dim_x :: DEVICE , &block_dim_x :: DEVICE , &block_idx_x :: DEVICE]
    }
    fn __key < T : Scalar > () -> :: std :: vec :: Vec < :: std :: string :: String > where T : :: symm :: dsl :: Scalar {
        :: std :: vec![< T as :: symm :: dsl :: Scalar > :: CUDA . to_string ()]
    }
    #[doc = r" The complete CUDA C of these generic arguments, exporting `__entry`."]
    #[doc (hidden)]
    pub fn __source < T : Scalar > (__entry : &str) -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        let mut __w = WRAPPER . replace ("$ENTRY$" , __entry) ;
        __w = __w . replace ("$G_T$" , < T as :: symm :: dsl :: Scalar > :: CUDA) ;
        :: symm :: __private_0_1_0 :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for < T : Scalar > () -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        __source :: < T > (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel), as"]
    #[doc = r" [`launch_unchecked`] runs it: indices unchecked."]
    pub fn compile_for < T : Scalar > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , false , &| __e | __source :: < T > (__e) , arch)
    }
    #[doc = r" [`compile_for`], as [`launch`] runs the kernel: every index"]
    #[doc = r" bounds-checked."]
    pub fn compile_checked_for < T : Scalar > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , true , &| __e | __source :: < T > (__e) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 15usize ;
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
    pub fn co_resident_grid < T : Scalar > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , true , block , shared_mem , &| __e | __source :: < T > (__e))
    }
    #[doc = r" [`co_resident_grid`] for [`launch_unchecked`], whose"]
    #[doc = r" instantiation (without bounds checks) may fit more blocks."]
    pub fn co_resident_grid_unchecked < T : Scalar > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , false , block , shared_mem , &| __e | __source :: < T > (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here. The"]
    #[doc = r" kernel's indexing (`x[i]`) is bounds-checked on the GPU too:"]
    #[doc = r" the first index out of bounds is reported by the next"]
    #[doc = r" synchronisation as [`Error::KernelFault`](::symm::Error::KernelFault)"]
    #[doc = r" (naming the rank, block, thread, index, length and source"]
    #[doc = r" line), and nothing out of bounds is read or written there."]
    pub fn launch < T : Scalar > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &(impl :: symm :: DeviceSlice < T > + ? Sized) , out : &:: symm :: SymmetricMemory , chunk : u32 , entry : u32 , exit : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T > (true , comm , cfg , input , out , chunk , entry , exit)
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
    pub unsafe fn launch_unchecked < T : Scalar > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &(impl :: symm :: DeviceSlice < T > + ? Sized) , out : &:: symm :: SymmetricMemory , chunk : u32 , entry : u32 , exit : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T > (false , comm , cfg , input , out , chunk , entry , exit)
        }
    }
    #[doc = r" Packs the arguments and launches, checked or not."]
    #[doc = r""]
    #[doc = r" # Safety"]
    #[doc = r""]
    #[doc = r" Unless `__checked`, as [`launch_unchecked`]."]
    unsafe fn __launch < T : Scalar > (__checked : bool , comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &(impl :: symm :: DeviceSlice < T > + ? Sized) , out : &:: symm :: SymmetricMemory , chunk : u32 , entry : u32 , exit : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private_0_1_0 :: HIDDEN_SLOTS ;
        let (__ptr , __len) = :: symm :: __private_0_1_0 :: slice_arg :: < T , _ > (comm , "input" , &* input) ? ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot_u64 (__ptr) ;
        __p [__k + 1] = :: symm :: __private_0_1_0 :: slot_u64 (__len as u64) ;
        __k += 2 ;
        let __a_input = unsafe {
            :: symm :: dsl :: Slice :: < T > :: __new (__ptr , __len)
        }
        ;
        let __s = :: symm :: __private_0_1_0 :: symm_arg :: < T > (comm , "out" , out) ? ;
        __p [__k .. __k + :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS ;
        let __a_out = unsafe {
            :: symm :: __private_0_1_0 :: symm_handle :: < T > (out)
        }
        ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot (chunk) ;
        __k += 1 ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot (entry) ;
        __k += 1 ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot (exit) ;
        __k += 1 ;
        let _ = __k ;
        let __key = __key :: < T > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        let __src = | __e : &str | __source :: < T > (__e) ;
        let __cpu = || cpu :: < T > (__a_input , __a_out , chunk , entry , exit) ;
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
    pub fn cpu < T : Scalar > (input : :: symm :: dsl :: Slice < T > , out : SymmBuf < T > , chunk : u32 , entry : u32 , exit : u32) where T : :: symm :: dsl :: Scalar {
        #[allow (unused_imports)]
        use :: symm :: __private_0_1_0 :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        let rank = out . rank () ;
        let world = out . world_size () ;
        let t = thread_idx_x () ;
        if t < world &&t!= rank {
            out . put_signal (t , entry) ;
            out . wait_signal (t , entry) ;
        }
        sync_threads () ;
        let stride = grid_dim_x () * block_dim_x () ;
        for k in 0 .. world {
            let dst = out . peer ((rank + k) % world) ;
            let mut i = block_idx_x () * block_dim_x () + t ;
            while i < chunk {
                (dst) . __dsl_set (rank * chunk + i , (input) . __dsl_get (i)) ;
                i += stride ;
            }
        }
        sync_threads () ;
        if t < world &&t!= rank {
            out . put_signal (t , exit) ;
            out . wait_signal (t , exit) ;
        }
    }
}
