#[doc = " Stores this block's new epoch, once every thread has read the old one."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn commit_epoch < T : Scalar > (buf : SymmBuf < T > , epoch : u32 , ch : u32) where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    sync_threads () ;
    if thread_idx_x () == 0 {
        let rank = buf . rank () ;
        buf . pad (rank) . store (signal_slot (ch + 2 , block_idx_x () , rank) , epoch , StoreOrder :: Relaxed , Scope :: Gpu ,) ;
    }
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod commit_epoch {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "commit_epoch" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&sync_threads :: DEVICE , &thread_idx_x :: DEVICE , &signal_slot :: DEVICE , &block_idx_x :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
