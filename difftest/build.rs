//! Writes the corpus: `SYMM_DIFFTEST_KERNELS` random `#[symm_kernel]`s
//! (default 200) from the seed `SYMM_DIFFTEST_SEED` (default: the day
//! number since 1970, so each day's CI checks a fresh corpus), with the
//! classes of `gen::Class` on by default (every fixed one; see
//! `SYMM_DIFFTEST_INCLUDE` for switching: a comma list, `all`, or
//! `-name`).

#[path = "common.rs"]
mod common;
#[path = "gen.rs"]
mod gen;

use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    for var in [
        "SYMM_DIFFTEST_SEED",
        "SYMM_DIFFTEST_KERNELS",
        "SYMM_DIFFTEST_INCLUDE",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=gen.rs");
    let seed = match std::env::var("SYMM_DIFFTEST_SEED") {
        Ok(s) => parse_u64(&s).unwrap_or_else(|| panic!("SYMM_DIFFTEST_SEED={s}: not an integer")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() / 86_400)
            .unwrap_or(0),
    };
    let count = match std::env::var("SYMM_DIFFTEST_KERNELS") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("SYMM_DIFFTEST_KERNELS={s}: not a count")),
        Err(_) => 200,
    };
    let include = std::env::var("SYMM_DIFFTEST_INCLUDE").unwrap_or_default();
    let classes = gen::Class::parse_list(&include).unwrap_or_else(|e| panic!("{e}"));
    let corpus = gen::corpus(seed, count, &classes);
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("corpus.rs"), corpus).expect("write corpus.rs");
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}
