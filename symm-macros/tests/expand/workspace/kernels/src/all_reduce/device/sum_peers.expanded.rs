#[doc = " Loads elements `i..i + V` (one 16-byte vector) from every rank's `buf`,"]
#[doc = " all loads issued before any arithmetic, and sums them in f32 in rank"]
#[doc = " order 0, 1, …: the same bits on every rank."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn sum_peers < T : Scalar , const V : usize > (buf : SymmBuf < T > , i : u32 , world : u32) -> [T ; V] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let zero : [T ; V] = [T :: from_f32 (0.0f32) ; V] ;
    let mut vals : [[T ; V] ; 8] = [zero ; 8] ;
    for r in 0 .. world {
        (vals) . __dsl_set (r , buf . peer (r) . load_vec :: < V > (i)) ;
    }
    sum_in_rank_order :: < T , V > (vals , world)
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod sum_peers {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "sum_peers" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&sum_in_rank_order :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
