#[doc = " Floating-point arithmetic, min/max/abs/fma/sqrt, casts and a helper."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn mix < T : DslFloat > (a : T , b : T) -> T where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let c = a * b + a - b / (abs (b) + T :: one ()) ;
    max (min (c , a * T :: from_f32 (2.0f32)) , fma (a , b , c))
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod mix {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "mix" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
