#[doc = " `v` with any element that has the Lamport stage's empty bits replaced"]
#[doc = " by that NaN with its sign bit cleared (see [`lamport_load`])."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn lamport_scrub < T : Scalar , const V : usize > (v : [T ; V]) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let empty = T :: from_bits32 (0xFFFF_FFFFu32) . to_bits32 () ;
    let mut w = v ;
    for k in 0 .. V {
        if (w) . __dsl_get (k) . to_bits32 () == empty {
            (w) . __dsl_set (k , T :: from_bits32 (empty >> 1)) ;
        }
    }
    w
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod lamport_scrub {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "lamport_scrub" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
