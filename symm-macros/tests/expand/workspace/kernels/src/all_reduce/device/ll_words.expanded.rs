#[doc = " The data words of LL packet pair `g`: elements `(2g + h) * P ..` packed"]
#[doc = " `P` to a 32-bit word, low element first; elements at or past `n` (and"]
#[doc = " whole pairs past the end) read as zero bits."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn ll_words < T : Scalar , const P : usize > (src : Remote < T > , g : u32 , n : u32) -> [u32 ; 2] where T : :: symm :: dsl :: Scalar {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let per = P as u32 ;
    let width = 32 / per ;
    let mut words : [u32 ; 2] = [0u32 ; 2] ;
    for h in 0 .. 2u32 {
        for k in 0 .. per {
            let e = (g * 2 + h) * per + k ;
            if e < n {
                {
                    let __symm_i = h ;
                    let __symm_v = (words) . __dsl_get (__symm_i) | ((src) . __dsl_get (e) . to_bits32 () << (k * width)) ;
                    (words) . __dsl_set (__symm_i , __symm_v)
                }
                ;
            }
        }
    }
    words
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod ll_words {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "ll_words" , source : "(CUDA C: see the .cu snapshot)" , deps : &[] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
