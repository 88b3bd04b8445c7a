#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
fn norm < T : DslFloat > (a : T) -> T where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    a * a
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
mod norm {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "norm" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
