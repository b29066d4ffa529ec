//! CPU references, in one table ([`REFERENCES`]): the name a spec's `reference` gives, the
//! element types it computes, how it computes an op's expected output from its inputs, and,
//! for ops whose expected output is computed on the GPU (`reference_kernel`, for shapes too
//! large for the CPU), the spot check of that output against rows computed on the CPU. A new
//! reference is a file here with its `INFO` and one entry in [`REFERENCES`].
//!
//! Data are raw little-endian bytes of the run's element type, in and out, so a reference that
//! only moves elements serves every type. A name the table does not hold (`config`, a user's
//! reference configuration) is computed on the GPU: any type.
//!
//! The table is in `spec` rather than `measure`, where it is used, because reading a spec
//! checks the op's `dtypes` against its reference's, and `spec` imports nothing above it.

pub mod copy;
pub mod matmul;
pub mod transpose;

use crate::error::{Error, Result};
use crate::model::dtype::{self, Dtype};
use crate::model::shape::Shape;

/// One CPU reference.
pub struct Reference {
    /// The name a spec's `reference` gives.
    pub name: &'static str,
    /// What it computes, in one line (for docs/spec.md and messages).
    pub about: &'static str,
    /// The element types it computes; empty: every type (it only moves elements).
    pub dtypes: &'static [Dtype],
    /// The expected output, from the op's input buffers in spec order. `None` when the shape
    /// has another number of dimensions, or there are other inputs, than it takes.
    pub compute: Compute,
    /// Checks an expected output computed on the GPU against rows computed on the CPU, and
    /// says what it checked; absent for references that are not computed on the GPU. `None`
    /// like `compute`.
    pub spot_check: Option<SpotCheck>,
}

/// Arguments: the shape, the run's element type and the inputs.
pub type Compute = fn(&Shape, Dtype, &[&[u8]]) -> Option<Vec<u8>>;

/// Arguments: the shape, the inputs, the GPU's output and the run's seed (which rows).
pub type SpotCheck = fn(&Shape, &[&[u8]], &[u8], u64) -> Option<Result<String>>;

/// Every CPU reference, by name.
pub const REFERENCES: &[Reference] = &[transpose::INFO, matmul::INFO, copy::INFO];

/// The registered reference `name`.
pub fn lookup(name: &str) -> Option<&'static Reference> {
    REFERENCES.iter().find(|r| r.name == name)
}

impl Reference {
    /// Whether it computes outputs of `dtype`.
    pub fn supports(&self, dtype: Dtype) -> bool {
        self.dtypes.is_empty() || self.dtypes.contains(&dtype)
    }
}

/// Whether the reference `name` can compute outputs of `dtype`: what its entry says; a name
/// without an entry runs on the GPU, in any type.
pub fn supports(name: &str, dtype: Dtype) -> bool {
    lookup(name).is_none_or(|r| r.supports(dtype))
}

/// The error for a reference asked for a type it does not compute.
fn unsupported(r: &Reference, dtype: Dtype) -> Error {
    Error::Usage(format!(
        "the CPU reference '{}' computes {} only, not {dtype}",
        r.name,
        dtype::names(r.dtypes)
    ))
}

/// An op's expected output computed on the CPU by the reference `name`, as raw bytes of
/// `dtype`; `inputs` are the op's input buffers in spec order, raw bytes of `dtype` too.
pub fn compute(name: &str, shape: &Shape, dtype: Dtype, inputs: &[&[u8]]) -> Result<Vec<u8>> {
    let entry = lookup(name);
    if let Some(r) = entry.filter(|r| !r.supports(dtype)) {
        return Err(unsupported(r, dtype));
    }
    entry
        .and_then(|r| (r.compute)(shape, dtype, inputs))
        .ok_or_else(|| {
            Error::Usage(format!(
                "no CPU reference named '{name}' for a {}-dimensional shape with {} input(s)",
                shape.dims.len(),
                inputs.len()
            ))
        })
}

/// Checks an expected output computed on the GPU with the spot check of the reference `name`;
/// says what was checked.
pub fn spot_check(
    name: &str,
    shape: &Shape,
    inputs: &[&[u8]],
    gpu_reference: &[u8],
    seed: u64,
) -> Result<String> {
    lookup(name)
        .and_then(|r| r.spot_check)
        .and_then(|check| check(shape, inputs, gpu_reference, seed))
        .unwrap_or_else(|| {
            Err(Error::Usage(format!(
                "no CPU spot check named '{name}' for this shape"
            )))
        })
}

/// Raw little-endian bytes of float32 values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Float32 values from raw little-endian bytes (a trailing partial value is ignored).
pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_described() {
        for (i, r) in REFERENCES.iter().enumerate() {
            assert!(!r.about.is_empty(), "{}", r.name);
            assert!(
                REFERENCES[..i].iter().all(|other| other.name != r.name),
                "{} is registered twice",
                r.name
            );
            assert_eq!(lookup(r.name).map(|x| x.name), Some(r.name));
        }
        assert!(lookup("config").is_none(), "config runs on the GPU");
    }

    #[test]
    fn dtypes_come_from_the_entry() {
        assert!(supports("transpose", Dtype::F64));
        assert!(supports("copy", Dtype::Bf16));
        assert!(supports("config", Dtype::F16));
        assert!(supports("matmul", Dtype::F32));
        assert!(!supports("matmul", Dtype::F64));
        let shape = Shape {
            dims: vec![1, 1, 1],
        };
        let one = 1.0f64.to_le_bytes();
        let e = compute("matmul", &shape, Dtype::F64, &[&one, &one]).unwrap_err();
        assert!(e.to_string().contains("computes f32 only, not f64"), "{e}");
    }

    /// An unknown name, and a known one given the wrong shape or inputs, are one error.
    #[test]
    fn unknown_names_and_wrong_inputs_are_refused() {
        let shape = Shape { dims: vec![2, 2] };
        let input = [0u8; 16];
        for (name, inputs) in [("fft", 1), ("transpose", 2), ("matmul", 2)] {
            let given: Vec<&[u8]> = (0..inputs).map(|_| &input[..]).collect();
            let e = compute(name, &shape, Dtype::F32, &given).unwrap_err();
            assert!(
                e.to_string().contains(&format!(
                    "no CPU reference named '{name}' for a 2-dimensional shape with {inputs} input(s)"
                )),
                "{e}"
            );
        }
        for name in ["transpose", "fft"] {
            let e = spot_check(name, &shape, &[&input], &input, 1).unwrap_err();
            assert!(e.to_string().contains("no CPU spot check named"), "{e}");
        }
    }
}
