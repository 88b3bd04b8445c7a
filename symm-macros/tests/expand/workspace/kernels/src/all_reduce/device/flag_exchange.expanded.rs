#[doc = " Exchanges this block's `epoch` flag with every peer on `channel` of"]
#[doc = " `buf`'s pad: after it, every peer's block has done (and made visible)"]
#[doc = " whatever it did before its own exchange."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn flag_exchange < T : Scalar > (buf : SymmBuf < T > , channel : u32 , epoch : u32) where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    sync_threads () ;
    let t = thread_idx_x () ;
    if t < buf . world_size () &&t!= buf . rank () {
        buf . signal_flag (t , channel , epoch) ;
        buf . wait_flag (t , channel , epoch) ;
    }
    sync_threads () ;
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod flag_exchange {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "flag_exchange" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&sync_threads :: DEVICE , &thread_idx_x :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
