//! `SYMM_DUMP=<dir>` writes each compiled kernel's CUDA C and PTX.

use symm::jit::Arch;

#[path = "support/targets.rs"]
mod targets;
use symm::kernels::broadcast;
use targets::nvrtc;

#[test]
fn symm_dump_writes_cuda_and_ptx() {
    if !nvrtc("the dumped kernels") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // This test binary has no other test, so the variable affects nothing else.
    std::env::set_var("SYMM_DUMP", dir.path());
    let arch = Arch { major: 9, minor: 0 };
    broadcast::compile_for::<f32>(arch).unwrap();
    broadcast::compile_checked_for::<f32>(arch).unwrap();
    // The entries a GPU launch uses: the name and a hash of the generic
    // arguments, with `_c` for the bounds-checked instantiation.
    let mut stems: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".cu").map(str::to_string))
        .collect();
    stems.sort();
    assert_eq!(stems.len(), 2, "{stems:?}");
    let (plain, checked) = (&stems[0], &stems[1]);
    assert!(
        plain.starts_with("broadcast__") && plain.len() == "broadcast__".len() + 16,
        "{plain}"
    );
    assert_eq!(*checked, format!("{plain}_c"));
    for (entry, define) in [
        (plain, "#define SYMM_CHECKED 0"),
        (checked, "#define SYMM_CHECKED 1"),
    ] {
        let cu = std::fs::read_to_string(dir.path().join(format!("{entry}.cu"))).unwrap();
        let ptx = std::fs::read_to_string(dir.path().join(format!("{entry}.ptx"))).unwrap();
        assert!(
            cu.starts_with(define)
                && cu.contains(&format!("extern \"C\" __global__ void {entry}("))
                && cu.contains("k_broadcast<float>"),
            "{}",
            &cu[..cu.len().min(400)]
        );
        assert!(
            ptx.contains(&format!(".entry {entry}(")) && ptx.contains(".target sm_90"),
            "{}",
            &ptx[..ptx.len().min(400)]
        );
    }
}
