//! Helpers shared by the integration tests (each test crate that uses them says `mod common;`).

use cuda_autotune::ops::Op;

/// `--param NAME=value` for every transpose parameter whose spec names the value it had
/// before it existed (`missing`: VEC=1, TILES_PER_BLOCK=1, ASPECT=square, CACHE=default,
/// RUNS=tile). With them pinned, a test's space is the classic kernel's parameters it sets
/// itself, so its variant counts do not move when the op gains a parameter.
#[allow(dead_code)] // not every test crate that says `mod common;` uses both forms
pub fn classic_transpose_pins() -> Vec<String> {
    classic_transpose_params()
        .into_iter()
        .flat_map(|p| ["--param".to_string(), p])
        .collect()
}

/// The same pins as `NAME=value` overrides (`TuneOptions::params`).
pub fn classic_transpose_params() -> Vec<String> {
    Op::load("transpose", None)
        .expect("the built-in transpose op")
        .assumed_params(&[])
}
