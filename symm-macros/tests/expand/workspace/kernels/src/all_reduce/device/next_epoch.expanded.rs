#[doc = " This block's epoch for the call: its counter (channel `ch + EPOCH` of"]
#[doc = " `buf`'s own pad) plus one. Every rank runs the same launches, so the"]
#[doc = " counters agree."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn next_epoch < T : Scalar > (buf : SymmBuf < T > , ch : u32) -> u32 where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let rank = buf . rank () ;
    buf . pad (rank) . load (signal_slot (ch + 2 , block_idx_x () , rank) , LoadOrder :: Relaxed , Scope :: Gpu ,) . wrapping_add (1)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod next_epoch {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "next_epoch" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&signal_slot :: DEVICE , &block_idx_x :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
