#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
fn helper < const N : usize > (s : Shared < f32 , 256 > , r : Remote < f32 > , v : Slice < f32 > , a : [f32 ; N]) -> [f32 ; 4] {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    let q = inner :: < N > ((a) . __dsl_get (0)) + inner :: < {
        N + 1
    }
    > ((s) . __dsl_get (0)) + r . load (0 , LoadOrder :: Relaxed , Scope :: System) + (v) . __dsl_get (0) ;
    if q > 0.0 {
        return [q ; 4] ;
    }
    if q < 1.0 {
        [1.0 , 2.0 , 3.0 , q]
    }
    else {
        [q , q , q , q]
    }
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
mod helper {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "helper" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&inner :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
