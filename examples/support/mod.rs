//! What the examples share (not an example itself: Cargo only builds
//! `examples/*.rs` and `examples/*/main.rs`).

use symm::Ranks;

/// The ranks from `--ranks N` (N GPUs when CUDA is there, else N emulated
/// ranks), or every local GPU, or `emulated` ranks on the emulator when
/// there is none. A bad N ends the program with a message and status 2.
pub(crate) fn ranks_from_args(emulated: usize) -> Ranks {
    match std::env::args().skip_while(|a| a != "--ranks").nth(1) {
        Some(n) => match n.parse() {
            Ok(n) if symm::cuda_available() => Ranks::Cuda((0..n).collect()),
            Ok(n) => Ranks::Emulator(n),
            Err(_) => {
                eprintln!("--ranks takes a number, got {n:?}");
                std::process::exit(2);
            }
        },
        None => Ranks::auto(emulated),
    }
}
