// A functional collective's output cannot be read while its result is in
// flight: the `Pending` borrows it until `wait`.
use symm::functional::Collectives;
use symm::kernels::collectives::ReduceOp;

fn step(coll: &Collectives, x: &symm::DeviceBuffer<f32>) -> symm::Result<Vec<f32>> {
    let mut out = coll.comm().device_buffer::<f32>(x.len())?;
    let pending = coll.all_reduce(x, &mut out, ReduceOp::Sum)?;
    let early = out.to_host()?;
    pending.wait()?;
    Ok(early)
}

fn main() {}
