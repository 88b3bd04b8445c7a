#[doc = " Two-shot all-reduce for large messages: rank r sums only chunk r of the"]
#[doc = " 16-byte vectors (reading it from every rank) and pushes the sums into"]
#[doc = " every rank's `scratch`; after an epoch barrier each rank copies the whole"]
#[doc = " result to `out`. Each rank reads and writes n elements instead of reading"]
#[doc = " `world × n`. Every phase walks chunk-local indices with the same (block,"]
#[doc = " thread) stride, so what block b copies out was written by block b of"]
#[doc = " each rank, which block b's barrier orders. `out` may be this rank's"]
#[doc = " `input` (it is written only after every rank has finished reading it)."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
pub mod two_shot_all_reduce {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "two_shot_all_reduce" ;
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
    pub const PARAM_SLOTS : usize = 21usize ;
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
    pub fn launch < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &:: symm :: SymmetricMemory , scratch : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T , V , W > (true , comm , cfg , input , scratch , out , n , ch)
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
    pub unsafe fn launch_unchecked < T : Scalar , const V : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &:: symm :: SymmetricMemory , scratch : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T , V , W > (false , comm , cfg , input , scratch , out , n , ch)
        }
    }
    #[doc = r" Packs the arguments and launches, checked or not."]
    #[doc = r""]
    #[doc = r" # Safety"]
    #[doc = r""]
    #[doc = r" Unless `__checked`, as [`launch_unchecked`]."]
    unsafe fn __launch < T : Scalar , const V : usize , const W : usize > (__checked : bool , comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &:: symm :: SymmetricMemory , scratch : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private_0_1_0 :: HIDDEN_SLOTS ;
        let __s = :: symm :: __private_0_1_0 :: symm_arg :: < T > (comm , "input" , input) ? ;
        __p [__k .. __k + :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS ;
        let __a_input = unsafe {
            :: symm :: __private_0_1_0 :: symm_handle :: < T > (input)
        }
        ;
        let __s = :: symm :: __private_0_1_0 :: symm_arg :: < T > (comm , "scratch" , scratch) ? ;
        __p [__k .. __k + :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS ;
        let __a_scratch = unsafe {
            :: symm :: __private_0_1_0 :: symm_handle :: < T > (scratch)
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
        let __cpu = || cpu :: < T , V , W > (__a_input , __a_scratch , __a_out , n , ch) ;
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
    pub fn cpu < T : Scalar , const V : usize , const W : usize > (input : SymmBuf < T > , scratch : SymmBuf < T > , out : :: symm :: dsl :: SliceMut < T > , n : u32 , ch : u32) where T : :: symm :: dsl :: Scalar {
        #[allow (unused_imports)]
        use :: symm :: __private_0_1_0 :: {
            ArrayIndex as _ , HandleGet as _ , HandleSet as _
        }
        ;
        enter_call () ;
        let rank = input . rank () ;
        let world = if W > 0 {
            W as u32
        }
        else {
            input . world_size ()
        }
        ;
        let epoch = next_epoch (input , ch) ;
        epoch_barrier (input , ch , epoch) ;
        let stride = grid_dim_x () * block_dim_x () ;
        let first = block_idx_x () * block_dim_x () + thread_idx_x () ;
        let vecs = n / V as u32 ;
        let chunk = (vecs + world - 1) / world ;
        let base = rank * chunk ;
        let mut j = first ;
        while j < chunk &&base + j < vecs {
            let i = (base + j) * V as u32 ;
            let res = sum_peers :: < T , V > (input , i , world) ;
            for r in 0 .. world {
                scratch . peer (r) . store_vec :: < V > (i , res) ;
            }
            j += stride ;
        }
        let e = vecs * V as u32 + first ;
        let mut tail : f32 = 0.0 ;
        if e < n {
            for r in 0 .. world {
                tail += (input . peer (r)) . __dsl_get (e) . to_f32 () ;
            }
        }
        sync_threads () ;
        epoch_barrier (input , ch + 1 , epoch) ;
        let mine = scratch . local () ;
        for c in 0 .. world {
            let mut j = first ;
            while j < chunk &&c * chunk + j < vecs {
                let i = (c * chunk + j) * V as u32 ;
                out . store_vec :: < V > (i , mine . load_vec :: < V > (i)) ;
                j += stride ;
            }
        }
        if e < n {
            (out) . __dsl_set (e , T :: from_f32 (tail)) ;
        }
        commit_epoch (input , epoch , ch) ;
    }
}
