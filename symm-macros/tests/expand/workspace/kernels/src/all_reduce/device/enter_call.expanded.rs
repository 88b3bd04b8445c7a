#[doc = " First thing in every all-reduce kernel, which is launched with"]
#[doc = " programmatic dependent launch: wait for the previous kernel on the"]
#[doc = " stream (it may have written the input, or still use the output), and let"]
#[doc = " the next one start launching while this one runs."]
#[allow (clippy :: all , unused_mut , unused_variables , unused_parens , unused_braces)]
pub fn enter_call () {
    #[allow (unused_imports)]
    use :: symm :: __private_0_1_0 :: {
        ArrayIndex as _ , HandleGet as _ , HandleSet as _
    }
    ;
    grid_dependency_wait () ;
    launch_dependents () ;
}
#[doc (hidden)]
#[allow (non_snake_case , unused_imports , dead_code)]
pub mod enter_call {
    use super :: * ;
    #[doc = r" This function's CUDA C, and the device functions it calls."]
    pub static DEVICE : :: symm :: __private_0_1_0 :: DeviceFn = :: symm :: __private_0_1_0 :: DeviceFn {
        name : "enter_call" , source : "(CUDA C: see the .cu snapshot)" , deps : &[&grid_dependency_wait :: DEVICE , &launch_dependents :: DEVICE] , file : :: core :: file!() , line : :: core :: line!() ,
    }
    ;
}
