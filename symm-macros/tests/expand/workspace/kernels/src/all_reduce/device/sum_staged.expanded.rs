#[doc = " Elements `i..i + V` summed in f32 in rank order 0, 1, …, where rank"]
#[doc = " `rank`'s part is `own[i..]` and every other rank r's is"]
#[doc = " `stage[at + r * region + j..]`: all loads issued before any arithmetic."]
#[doc = " (A separate `j` lets a caller stage at other offsets than it reads.)"]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn sum_staged < T : Scalar , const V : usize > (own : Remote < T > , i : u32 , stage : Remote < T > , at : u32 , region : u32 , j : u32 , rank : u32 , world : u32) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let zero : [T ; V] = [T :: from_f32 (0.0f32) ; V] ;
    let mut vals : [[T ; V] ; 8] = [zero ; 8] ;
    for r in 0 .. world {
        (vals) . __dsl_set (r , if r == rank { own . load_vec :: < V > (i) } else { stage . load_vec :: < V > (at + r * region + j) }) ;
    }
    sum_in_rank_order :: < T , V > (vals , world)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod sum_staged {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "sum_staged" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&sum_in_rank_order :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
