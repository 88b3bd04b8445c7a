#[doc = " The element-wise sum of `vals[0..world]`, in f32, in rank order 0, 1, …"]
#[doc = " (the same bits on every rank), rounded once to `T`."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn sum_in_rank_order < T : Scalar , const V : usize > (vals : [[T ; V] ; 8] , world : u32) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    sum_with_own :: < T , V > (vals , (vals) . __dsl_get (0) , 8 , world)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod sum_in_rank_order {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "sum_in_rank_order" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&sum_with_own :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
