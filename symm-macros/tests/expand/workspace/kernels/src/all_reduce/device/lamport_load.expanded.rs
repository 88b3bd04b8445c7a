#[doc = " Elements `at..at + V` of `src` (zeros past `n`), with any element that"]
#[doc = " has the Lamport stage's empty bits (all ones, a NaN) replaced by that"]
#[doc = " NaN with its sign bit cleared: still a NaN, so the sum is unchanged in"]
#[doc = " kind, but it can no longer read as \"not arrived\"."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn lamport_load < T : Scalar , const V : usize > (src : Remote < T > , at : u32 , n : u32) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let mut v : [T ; V] = [T :: from_f32 (0.0f32) ; V] ;
    if at + V as u32 <= n {
        v = src . load_vec :: < V > (at) ;
    }
    else {
        for k in 0 .. V {
            let e = at + k as u32 ;
            if e < n {
                (v) . __dsl_set (k , (src) . __dsl_get (e)) ;
            }
        }
    }
    lamport_scrub :: < T , V > (v)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod lamport_load {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "lamport_load" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&lamport_scrub :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
