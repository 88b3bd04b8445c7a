#[doc = " A device function's shared array: its own, apart from its caller's."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn stash_reversed (v : u32) -> u32 {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let s = :: symm :: dsl :: __shared_array_at :: < u32 , {
        32
    }
    > (:: core :: concat!(:: core :: module_path!() , "::" , "stash_reversed") , 0u32) ;
    let t = thread_idx_x () ;
    (s) . __dsl_set (t , v) ;
    sync_threads () ;
    (s) . __dsl_get (31 - t)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod stash_reversed {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "stash_reversed" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&thread_idx_x :: DEVICE , &sync_threads :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
