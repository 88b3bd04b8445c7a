// A reduction of a type symm's reductions do not take: the error names the
// type and lists the ones they do, instead of pointing into the library's
// dispatch macros.
use symm::functional::{Collectives, ReduceOp};

fn count(coll: &Collectives, x: &symm::DeviceBuffer<u8>) -> symm::Result<()> {
    let mut out = coll.comm().device_buffer::<u8>(x.len())?;
    coll.all_reduce(x, &mut out, ReduceOp::Sum)?.wait()?;
    Ok(())
}

fn main() {}
