#[doc = " Block-wide epoch barrier with every rank on `channel`."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn epoch_barrier < T : Scalar > (buf : SymmBuf < T > , channel : u32 , epoch : u32) where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let t = thread_idx_x () ;
    if t < buf . world_size () &&t!= buf . rank () {
        buf . signal_flag (t , channel , epoch) ;
        buf . wait_flag (t , channel , epoch) ;
    }
    sync_threads () ;
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod epoch_barrier {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "epoch_barrier" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&thread_idx_x :: DEVICE , &sync_threads :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
