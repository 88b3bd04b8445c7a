#[doc = " This thread's first index of a grid-stride loop in which consecutive"]
#[doc = " warps belong to different blocks, so a call that needs only a few warps"]
#[doc = " spreads them over many SMs (each SM's stores to peers are the limit)."]
#[doc = " With a fixed grid, an index always lands in the same block, which the"]
#[doc = " per-block flags rely on. Blocks must be whole warps."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn spread_first () -> u32 {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let t = thread_idx_x () ;
    ((t / 32) * grid_dim_x () + block_idx_x ()) * 32 + t % 32
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod spread_first {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "spread_first" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&thread_idx_x :: DEVICE , &grid_dim_x :: DEVICE , &block_idx_x :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
