#[doc = " [`sum_in_rank_order`] with `own` in place of `vals[rank]` (a `rank` of 8"]
#[doc = " or more replaces nothing). A select per rank, not a store into `vals`:"]
#[doc = " with a run-time `rank`, a store would index the array at run time and"]
#[doc = " move it to local memory."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn sum_with_own < T : Scalar , const V : usize > (vals : [[T ; V] ; 8] , own : [T ; V] , rank : u32 , world : u32) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let mut acc : [f32 ; V] = [0.0f32 ; V] ;
    for r in 0 .. world {
        let v = if r == rank {
            own
        }
        else {
            (vals) . __dsl_get (r)
        }
        ;
        for k in 0 .. V {
            {
                let __symm_i = k ;
                let __symm_v = (acc) . __dsl_get (__symm_i) + ((v) . __dsl_get (k) . to_f32 ()) ;
                (acc) . __dsl_set (__symm_i , __symm_v)
            }
            ;
        }
    }
    let mut res : [T ; V] = [T :: from_f32 (0.0f32) ; V] ;
    for k in 0 .. V {
        (res) . __dsl_set (k , T :: from_f32 ((acc) . __dsl_get (k))) ;
    }
    res
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod sum_with_own {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "sum_with_own" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
