// An output handed to a functional collective by value comes back only
// from `wait`: using it before is a use after move.
use symm::functional::Collectives;
use symm::kernels::collectives::ReduceOp;

fn step(coll: &Collectives, x: &symm::DeviceBuffer<f32>) -> symm::Result<Vec<f32>> {
    let out = coll.comm().device_buffer::<f32>(x.len())?;
    let pending = coll.all_reduce(x, out, ReduceOp::Sum)?;
    let early = out.to_host()?;
    pending.wait()?;
    Ok(early)
}

fn main() {}
