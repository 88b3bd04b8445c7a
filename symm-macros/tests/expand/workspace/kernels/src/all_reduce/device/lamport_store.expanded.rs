#[doc = " Stores `v` at elements `at..at + V` of `out`, only those below `n`."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn lamport_store < T : Scalar , const V : usize > (out : SliceMut < T > , at : u32 , n : u32 , v : [T ; V]) where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    if at + V as u32 <= n {
        out . store_vec :: < V > (at , v) ;
    }
    else {
        for k in 0 .. V {
            if at + (k as u32) < n {
                (out) . __dsl_set (at + k as u32 , (v) . __dsl_get (k)) ;
            }
        }
    }
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod lamport_store {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "lamport_store" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
