#[doc = " Every block meets its counterpart on every rank: thread p signals rank p"]
#[doc = " on `channel` and waits for rank p's signal back. The signal is a"]
#[doc = " system-scope release and the wait an acquire, so what any rank's block"]
#[doc = " did before the barrier is visible to every rank's block after it."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn block_barrier < T : Scalar > (buf : SymmBuf < T > , channel : u32) where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    sync_threads () ;
    let p = thread_idx_x () ;
    if p < buf . world_size () &&p!= buf . rank () {
        buf . put_signal (p , channel) ;
        buf . wait_signal (p , channel) ;
    }
    sync_threads () ;
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod block_barrier {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "block_barrier" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&sync_threads :: DEVICE , &thread_idx_x :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
