//! What the examples share (not an example itself: Cargo only builds
//! `examples/*.rs` and `examples/*/main.rs`).

use symm::Ranks;

/// The ranks from `--ranks N` (N GPU ranks when CUDA is there, sharing
/// GPUs when there are fewer than N, see [`Ranks::gpus`]; else N emulated
/// ranks), or every local GPU, or `emulated` ranks on the emulator when
/// there is none. A bad N ends the program with a message and status 2.
pub(crate) fn ranks_from_args(emulated: usize) -> Ranks {
    let Some(n) = std::env::args().skip_while(|a| a != "--ranks").nth(1) else {
        return Ranks::auto(emulated);
    };
    let Ok(n) = n.parse() else {
        eprintln!("--ranks takes a number, got {n:?}");
        std::process::exit(2);
    };
    // Ranks that share a GPU need a setting made before CUDA starts (and
    // asking whether CUDA is there starts it).
    // SAFETY: the examples call this first thing in main, before any other
    // thread exists.
    unsafe { symm::prepare_shared_gpus() };
    match Ranks::gpus(n) {
        Some(r) => r,
        None if symm::cuda_available() => {
            eprintln!("--ranks {n}: cannot place {n} ranks on this machine's GPUs");
            std::process::exit(2);
        }
        None => Ranks::Emulator(n),
    }
}
