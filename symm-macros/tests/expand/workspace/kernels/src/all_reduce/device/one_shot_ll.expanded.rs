#[doc = " One-shot all-reduce with LL packets: each rank pushes `(epoch, bits)` as"]
#[doc = " single 8-byte volatile stores into every rank's `stage`, then polls its"]
#[doc = " own stage for every rank's packets of this epoch and sums them in f32 in"]
#[doc = " rank order. No barrier: the stage is double-buffered by epoch parity, and"]
#[doc = " a rank reaches epoch e only after every peer's e − 1 packets arrived,"]
#[doc = " which they sent after finishing e − 2, the last reader of that parity."]
#[doc = " `P` elements share a packet (1 for 4-byte, 2 for 2-byte types). `out`"]
#[doc = " may be this rank's own `input` (peers never read it). Launch with the"]
#[doc = " same grid every call on one `stage` (its per-block epochs must stay in"]
#[doc = " step): the built-in uses [`super::LL_BLOCKS`] × [`super::THREADS`], and"]
#[doc = " a smaller grid with its own stage for the smallest messages."]
#[allow (non_snake_case , unused_imports , dead_code , clippy :: all)]
pub mod one_shot_ll {
    use super :: * ;
    #[doc = r" The kernel's name."]
    pub const NAME : &str = "one_shot_ll" ;
    #[doc = "(CUDA C: see the .cu snapshot)"]
    pub const CUDA_BODY : &str = "(CUDA C: see the .cu snapshot)" ;
    const WRAPPER : &str = "(CUDA C: see the .cu snapshot)" ;
    #[doc = r" The translated CUDA C body (a template when the kernel is generic)."]
    pub fn cuda_source () -> &'static str {
        CUDA_BODY
    }
    fn __deps () -> :: std :: vec :: Vec < &'static :: symm :: __private_0_1_0 :: DeviceFn > {
        :: std :: vec![&enter_call :: DEVICE , &grid_dim_x :: DEVICE , &block_dim_x :: DEVICE , &spread_first :: DEVICE , &ll_words :: DEVICE , &next_epoch :: DEVICE , &commit_epoch :: DEVICE]
    }
    fn __key < T : Scalar , const P : usize , const W : usize > () -> :: std :: vec :: Vec < :: std :: string :: String > where T : :: symm :: dsl :: Scalar {
        :: std :: vec![< T as :: symm :: dsl :: Scalar > :: CUDA . to_string () , :: std :: format!("{}" , P) , :: std :: format!("{}" , W)]
    }
    #[doc = r" The complete CUDA C of these generic arguments, exporting `__entry`."]
    #[doc (hidden)]
    pub fn __source < T : Scalar , const P : usize , const W : usize > (__entry : &str) -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        let mut __w = WRAPPER . replace ("$ENTRY$" , __entry) ;
        __w = __w . replace ("$G_T$" , < T as :: symm :: dsl :: Scalar > :: CUDA) ;
        __w = __w . replace ("$G_P$" , &:: std :: format!("{}" , P)) ;
        __w = __w . replace ("$G_W$" , &:: std :: format!("{}" , W)) ;
        :: symm :: __private_0_1_0 :: kernel_source (&__deps () , CUDA_BODY , &__w)
    }
    #[doc = r" The complete CUDA C that is compiled for these generic arguments."]
    pub fn cuda_source_for < T : Scalar , const P : usize , const W : usize > () -> :: std :: string :: String where T : :: symm :: dsl :: Scalar {
        __source :: < T , P , W > (NAME)
    }
    #[doc = r" Compiles this instantiation to a CUBIN for `arch` with NVRTC,"]
    #[doc = r" without a GPU (the check CI runs on every kernel), as"]
    #[doc = r" [`launch_unchecked`] runs it: indices unchecked."]
    pub fn compile_for < T : Scalar , const P : usize , const W : usize > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , P , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , false , &| __e | __source :: < T , P , W > (__e) , arch)
    }
    #[doc = r" [`compile_for`], as [`launch`] runs the kernel: every index"]
    #[doc = r" bounds-checked."]
    pub fn compile_checked_for < T : Scalar , const P : usize , const W : usize > (arch : :: symm :: jit :: Arch) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , P , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . compile_check (&__key , true , &| __e | __source :: < T , P , W > (__e) , arch)
    }
    #[doc = r" Parameter slots of a launch: the CUDA entry's parameter count."]
    pub const PARAM_SLOTS : usize = 22usize ;
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
    pub fn co_resident_grid < T : Scalar , const P : usize , const W : usize > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , P , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , true , block , shared_mem , &| __e | __source :: < T , P , W > (__e))
    }
    #[doc = r" [`co_resident_grid`] for [`launch_unchecked`], whose"]
    #[doc = r" instantiation (without bounds checks) may fit more blocks."]
    pub fn co_resident_grid_unchecked < T : Scalar , const P : usize , const W : usize > (comm : &:: symm :: Comm , block : u32 , shared_mem : u32) -> :: symm :: Result < :: std :: option :: Option < u32 >> where T : :: symm :: dsl :: Scalar {
        let __key = __key :: < T , P , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        DEF . co_resident_grid (comm , &__key , false , block , shared_mem , &| __e | __source :: < T , P , W > (__e))
    }
    #[doc = r" Launches the kernel on `comm`'s stream. Argument types are"]
    #[doc = r" checked by rustc; that buffers belong to `comm`'s rank, and"]
    #[doc = r" symmetric buffers' element types, are checked here. The"]
    #[doc = r" kernel's indexing (`x[i]`) is bounds-checked on the GPU too:"]
    #[doc = r" the first index out of bounds is reported by the next"]
    #[doc = r" synchronisation as [`Error::KernelFault`](::symm::Error::KernelFault)"]
    #[doc = r" (naming the rank, block, thread, index, length and source"]
    #[doc = r" line), and nothing out of bounds is read or written there."]
    pub fn launch < T : Scalar , const P : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &:: symm :: SymmetricMemory , stage : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , cap : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T , P , W > (true , comm , cfg , input , stage , out , n , cap , ch)
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
    pub unsafe fn launch_unchecked < T : Scalar , const P : usize , const W : usize > (comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &:: symm :: SymmetricMemory , stage : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , cap : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        unsafe {
            __launch :: < T , P , W > (false , comm , cfg , input , stage , out , n , cap , ch)
        }
    }
    #[doc = r" Packs the arguments and launches, checked or not."]
    #[doc = r""]
    #[doc = r" # Safety"]
    #[doc = r""]
    #[doc = r" Unless `__checked`, as [`launch_unchecked`]."]
    unsafe fn __launch < T : Scalar , const P : usize , const W : usize > (__checked : bool , comm : &:: symm :: Comm , cfg : :: symm :: LaunchConfig , input : &:: symm :: SymmetricMemory , stage : &:: symm :: SymmetricMemory , out : &mut (impl :: symm :: DeviceSlice < T > + ? Sized) , n : u32 , cap : u32 , ch : u32) -> :: symm :: Result < () > where T : :: symm :: dsl :: Scalar {
        let mut __p = [[0u8 ; 8] ; PARAM_SLOTS] ;
        let mut __k : usize = :: symm :: __private_0_1_0 :: HIDDEN_SLOTS ;
        let __s = :: symm :: __private_0_1_0 :: symm_arg :: < T > (comm , "input" , input) ? ;
        __p [__k .. __k + :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS ;
        let __a_input = unsafe {
            :: symm :: __private_0_1_0 :: symm_handle :: < T > (input)
        }
        ;
        let __s = :: symm :: __private_0_1_0 :: symm_arg :: < u64 > (comm , "stage" , stage) ? ;
        __p [__k .. __k + :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS] . copy_from_slice (&__s) ;
        __k += :: symm :: __private_0_1_0 :: SYMM_BUF_SLOTS ;
        let __a_stage = unsafe {
            :: symm :: __private_0_1_0 :: symm_handle :: < u64 > (stage)
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
        __p [__k] = :: symm :: __private_0_1_0 :: slot (cap) ;
        __k += 1 ;
        __p [__k] = :: symm :: __private_0_1_0 :: slot (ch) ;
        __k += 1 ;
        let _ = __k ;
        let __key = __key :: < T , P , W > () ;
        let __key : :: std :: vec :: Vec < &str > = __key . iter () . map (| s | s . as_str ()) . collect () ;
        let __src = | __e : &str | __source :: < T , P , W > (__e) ;
        let __cpu = || cpu :: < T , P , W > (__a_input , __a_stage , __a_out , n , cap , ch) ;
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
    pub fn cpu < T : Scalar , const P : usize , const W : usize > (input : SymmBuf < T > , stage : SymmBuf < u64 > , out : :: symm :: dsl :: SliceMut < T > , n : u32 , cap : u32 , ch : u32) where T : :: symm :: dsl :: Scalar {
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
        let src = input . local () ;
        let mine = stage . local () ;
        let stride = grid_dim_x () * block_dim_x () ;
        let first = spread_first () ;
        let mut words = ll_words :: < T , P > (src , first , n) ;
        let epoch = next_epoch (stage , ch) ;
        let per = P as u32 ;
        let width = 32 / per ;
        let mask : u32 = if per == 1 {
            0xFFFF_FFFFu32
        }
        else {
            0xFFFFu32
        }
        ;
        let packets = (n + per - 1) / per ;
        let pairs = (packets + 1) / 2 ;
        let parity = epoch &1 ;
        let tag = (epoch as u64) << 32 ;
        let mut g = first ;
        while g < pairs {
            let pkt : [u64 ; 2] = [tag | ((words) . __dsl_get (0) as u64) , tag | ((words) . __dsl_get (1) as u64)] ;
            for r in 0 .. world {
                stage . peer (r) . store_vec_volatile :: < 2 > (((parity * world + rank) * cap + g) * 2 , pkt) ;
            }
            g += stride ;
            words = ll_words :: < T , P > (src , g , n) ;
        }
        let ranks = (1u32 << world) - 1 ;
        let mut q = first ;
        while q < pairs {
            let got : [[u64 ; 2] ; 8] = mine . gather_tagged2 ((parity * world * cap + q) * 2 , cap * 2 , ranks , epoch) ;
            let mut lo : [f32 ; P] = [0.0f32 ; P] ;
            let mut hi : [f32 ; P] = [0.0f32 ; P] ;
            for r in 0 .. world {
                let v = (got) . __dsl_get (r) ;
                let b0 = (v) . __dsl_get (0) as u32 ;
                let b1 = (v) . __dsl_get (1) as u32 ;
                for k in 0 .. P {
                    let s = k as u32 * width ;
                    {
                        let __symm_i = k ;
                        let __symm_v = (lo) . __dsl_get (__symm_i) + (T :: from_bits32 ((b0 >> s) &mask) . to_f32 ()) ;
                        (lo) . __dsl_set (__symm_i , __symm_v)
                    }
                    ;
                    {
                        let __symm_i = k ;
                        let __symm_v = (hi) . __dsl_get (__symm_i) + (T :: from_bits32 ((b1 >> s) &mask) . to_f32 ()) ;
                        (hi) . __dsl_set (__symm_i , __symm_v)
                    }
                    ;
                }
            }
            for k in 0 .. P {
                let e0 = q * 2 * per + k as u32 ;
                if e0 < n {
                    (out) . __dsl_set (e0 , T :: from_f32 ((lo) . __dsl_get (k))) ;
                }
                let e1 = e0 + per ;
                if e1 < n {
                    (out) . __dsl_set (e1 , T :: from_f32 ((hi) . __dsl_get (k))) ;
                }
            }
            q += stride ;
        }
        commit_epoch (stage , epoch , ch) ;
    }
}
