#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
fn stage (tile : Shared < f32 , 256 > , v : f32) {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    (tile) . __dsl_set (thread_idx_x () , v) ;
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
mod stage {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "stage" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&thread_idx_x :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
