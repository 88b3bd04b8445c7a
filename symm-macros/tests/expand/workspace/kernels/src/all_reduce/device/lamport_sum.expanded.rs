#[doc = " `own` (this rank's part, as [`lamport_load`] reads it) summed in f32 in"]
#[doc = " rank order with every other rank r's part, which arrives at"]
#[doc = " `stage[base + r * cap + j..]` (see [`lamport_take`])."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn lamport_sum < T : Scalar , const V : usize > (own : [T ; V] , stage : Remote < T > , base : u32 , cap : u32 , j : u32 , rank : u32 , world : u32) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let peers = ((1u32 << world) - 1) &!(1u32 << rank) ;
    let vals = lamport_take :: < T , V > (stage , base + j , cap , peers , world) ;
    sum_with_own :: < T , V > (vals , own , rank , world)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod lamport_sum {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "lamport_sum" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&lamport_take :: DEVICE , &sum_with_own :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
