#[doc = " Largest of a register array of `W` values."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn largest < T : DslFloat , const W : usize > (v : [T ; W]) -> T where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let mut m = (v) . __dsl_get (0) ;
    for k in 1 .. W {
        m = max (m , (v) . __dsl_get (k)) ;
    }
    m
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod largest {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "largest" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
