#[doc = " The slots `stage[first + r * stride..]` of every rank r in `ranks` (a"]
#[doc = " bit each), once they have arrived (all polled together: one memory"]
#[doc = " round trip after the last one lands), each marked empty again for the"]
#[doc = " call after next. Zeros for ranks not in `ranks`."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn lamport_take < T : Scalar , const V : usize > (stage : Remote < T > , first : u32 , stride : u32 , ranks : u32 , world : u32) -> [[T ; V] ; 8] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let empty = T :: from_bits32 (0xFFFF_FFFFu32) ;
    let cleared : [T ; V] = [empty ; V] ;
    let got : [[T ; V] ; 8] = stage . gather_ready :: < V > (first , stride , ranks , empty) ;
    for r in 0 .. world {
        if ((ranks >> r) &1u32) == 1u32 {
            stage . store_vec :: < V > (first + r * stride , cleared) ;
        }
    }
    got
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod lamport_take {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "lamport_take" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
