// A device function's CUDA C runs inside safely launched kernels, so safe
// code cannot make one.
use symm::dsl::DeviceFn;

static FORGED: DeviceFn = DeviceFn {
    name: "forged",
    source: "__device__ void f_forged() { *(int*)0 = 1; }",
    deps: &[],
    file: "",
    line: 0,
    asserts: &[],
};

static ALSO: DeviceFn = DeviceFn::new("also", "", &[], "", 0, &[]);

fn main() {}
