//! Verification: inputs that cannot hide bugs (uniform in [-1, 1], never zero), CPU
//! references, and a comparison kernel that checks a variant's output on the GPU against the
//! reference so only 32 bytes of counters come back per variant, whatever the shape.

use crate::error::{Error, Result};
use crate::gpu::{Arg, Buffer, Gpu, GpuResult, Kernel};
use crate::ops::Compare;
use crate::shape::Shape;
use crate::space::LaunchDims;
use rand::{Rng, SeedableRng};

/// Bit pattern of a quiet NaN: outputs are filled with it before a verification launch, so
/// an element the kernel never wrote cannot pass.
pub const NAN_BITS: u32 = 0x7fc0_0000;

/// `n` values uniform in [-1, 1], none exactly zero (zeros hide unwritten outputs).
pub fn random_input(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| loop {
            let v: f32 = rng.random_range(-1.0f32..=1.0);
            if v != 0.0 {
                break v;
            }
        })
        .collect()
}

/// Fills an input buffer as its spec says.
pub fn fill_input(fill: crate::ops::Fill, n: usize, seed: u64) -> Vec<f32> {
    match fill {
        crate::ops::Fill::Uniform => random_input(n, seed),
        crate::ops::Fill::Ones => vec![1.0; n],
        crate::ops::Fill::Iota => (0..n).map(|i| (i % 1024) as f32).collect(),
    }
}

/// Computes an op's expected output on the CPU. `inputs` are the op's input buffers in spec
/// order.
pub fn cpu_reference(name: &str, shape: &Shape, inputs: &[&[f32]]) -> Result<Vec<f32>> {
    match (name, shape.dims.as_slice(), inputs) {
        ("transpose", &[rows, cols], &[input]) => {
            Ok(transpose(input, rows as usize, cols as usize))
        }
        ("matmul", &[m, n, k], &[a, b]) => {
            let rows: Vec<usize> = (0..m as usize).collect();
            let c = matmul_rows_f64(a, b, n as usize, k as usize, &rows);
            Ok(c.iter().map(|&x| x as f32).collect())
        }
        _ => Err(Error::Usage(format!(
            "no CPU reference named '{name}' for a {}-dimensional shape with {} input(s)",
            shape.dims.len(),
            inputs.len()
        ))),
    }
}

/// Rows `rows` of C = A·B in float64, concatenated (A is ? x k, B is k x n, row-major).
pub fn matmul_rows_f64(a: &[f32], b: &[f32], n: usize, k: usize, rows: &[usize]) -> Vec<f64> {
    let mut out = vec![0f64; rows.len() * n];
    for (slot, &r) in rows.iter().enumerate() {
        let c = &mut out[slot * n..(slot + 1) * n];
        for (kk, &av) in a[r * k..(r + 1) * k].iter().enumerate() {
            let av = f64::from(av);
            for (cv, &bv) in c.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                *cv += av * f64::from(bv);
            }
        }
    }
    out
}

/// Checks a reference computed on the GPU against float64 rows computed on the CPU: the first
/// and last row and `samples` seeded random ones. Returns a description of what was checked.
pub fn spot_check(
    name: &str,
    shape: &Shape,
    inputs: &[&[f32]],
    gpu_reference: &[f32],
    seed: u64,
) -> Result<String> {
    let (&[m, n, k], &[a, b], "matmul") = (shape.dims.as_slice(), inputs, name) else {
        return Err(Error::Usage(format!(
            "no CPU spot check named '{name}' for this shape"
        )));
    };
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut rows = vec![0, m - 1];
    rows.extend((0..6).map(|_| rng.random_range(0..m)));
    rows.sort_unstable();
    rows.dedup();
    let cpu = matmul_rows_f64(a, b, n, k, &rows);
    for (slot, &r) in rows.iter().enumerate() {
        let want = &cpu[slot * n..(slot + 1) * n];
        let got = &gpu_reference[r * n..(r + 1) * n];
        let (mut d2, mut r2) = (0f64, 0f64);
        for (g, w) in got.iter().zip(want) {
            d2 += (f64::from(*g) - w).powi(2);
            r2 += w * w;
        }
        let rel = (d2 / r2.max(f64::MIN_POSITIVE)).sqrt();
        if rel.is_nan() || rel > 1e-6 {
            return Err(Error::Cuda {
                during: "checking the GPU float64 reference".into(),
                why: format!(
                    "row {r} differs from the CPU float64 result by relative error {rel:.2e}"
                ),
            });
        }
    }
    Ok(format!(
        "float64 GPU reference, spot-checked against float64 CPU rows {rows:?}"
    ))
}

/// out (cols x rows) = in (rows x cols) transposed, row-major.
pub fn transpose(input: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; rows * cols];
    // Blocked so large matrices do not thrash the CPU cache.
    const B: usize = 64;
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            for r in r0..(r0 + B).min(rows) {
                for c in c0..(c0 + B).min(cols) {
                    out[c * rows + r] = input[r * cols + c];
                }
            }
        }
    }
    out
}

/// What the comparison kernel counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Elements whose bits differ from the reference.
    pub mismatches: u64,
    /// Elements that are NaN in the output.
    pub nans: u64,
    /// ||out - ref|| / ||ref|| (over non-NaN arithmetic; NaN if any output is NaN).
    pub rel_err: f64,
}

impl Comparison {
    /// `Ok` when the output passes; otherwise the reason, for the variant's record.
    pub fn judge(&self, mode: Compare, rtol: f64, total: u64) -> std::result::Result<(), String> {
        match mode {
            Compare::Exact if self.mismatches == 0 => Ok(()),
            Compare::Exact => Err(format!(
                "wrong result: {} of {total} elements differ from the reference ({} NaN, i.e. never written)",
                self.mismatches, self.nans
            )),
            Compare::Tolerance if self.nans == 0 && self.rel_err <= rtol => Ok(()),
            Compare::Tolerance if self.nans > 0 => {
                Err(format!("wrong result: {} of {total} elements are NaN", self.nans))
            }
            Compare::Tolerance => Err(format!(
                "wrong result: relative error {:.3e} exceeds rtol {rtol:.1e}",
                self.rel_err
            )),
        }
    }
}

/// CUDA source of the comparison kernel.
pub const COMPARE_SOURCE: &str = r#"
extern "C" __global__ void ca_compare(const float* __restrict__ out, const float* __restrict__ ref,
                                      unsigned long long n, unsigned long long* counts, double* sums)
{
    unsigned long long mism = 0, nans = 0;
    double d2 = 0.0, r2 = 0.0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float o = out[i], r = ref[i];
        mism += (__float_as_uint(o) != __float_as_uint(r));
        nans += (o != o);
        const double d = (double)o - (double)r;
        d2 += d * d;
        r2 += (double)r * (double)r;
    }
    for (int off = 16; off > 0; off >>= 1) {
        mism += __shfl_down_sync(0xffffffffu, mism, off);
        nans += __shfl_down_sync(0xffffffffu, nans, off);
        d2 += __shfl_down_sync(0xffffffffu, d2, off);
        r2 += __shfl_down_sync(0xffffffffu, r2, off);
    }
    if ((threadIdx.x & 31) == 0) {
        if (mism) atomicAdd(&counts[0], mism);
        if (nans) atomicAdd(&counts[1], nans);
        atomicAdd(&sums[0], d2);
        atomicAdd(&sums[1], r2);
    }
}
"#;

/// The comparison kernel, loaded, with its 32-byte result buffer.
pub struct Checker {
    kernel: Kernel,
    result: Buffer,
    num_sms: u32,
}

impl Checker {
    pub fn new(gpu: &Gpu, cubin: &[u8]) -> GpuResult<Checker> {
        Ok(Checker {
            kernel: gpu.load(cubin, "ca_compare")?,
            result: gpu.alloc(8, "the comparison counters")?,
            num_sms: gpu.info.limits.num_sms.max(1) as u32,
        })
    }

    /// Compares `out` with `reference` element by element on the GPU.
    pub fn compare(&self, gpu: &Gpu, out: &Buffer, reference: &Buffer) -> GpuResult<Comparison> {
        gpu.fill_u32(&self.result, 0)?;
        let n = out.len.min(reference.len) as u64;
        let blocks = n.div_ceil(256).clamp(1, u64::from(self.num_sms) * 8) as u32;
        let dims = LaunchDims {
            grid: (blocks, 1, 1),
            block: (256, 1, 1),
        };
        let args = [
            Arg::Ptr(out.ptr),
            Arg::Ptr(reference.ptr),
            Arg::U64(n),
            Arg::Ptr(self.result.ptr),
            Arg::Ptr(self.result.ptr + 16),
        ];
        gpu.launch(&self.kernel, dims, &args)?;
        let raw = gpu.download(&self.result)?;
        let word = |i: usize| {
            u64::from(raw[2 * i].to_bits()) | (u64::from(raw[2 * i + 1].to_bits()) << 32)
        };
        let (d2, r2) = (f64::from_bits(word(2)), f64::from_bits(word(3)));
        let rel_err = if r2 > 0.0 {
            (d2 / r2).sqrt()
        } else {
            d2.sqrt()
        };
        let mismatches = if out.len == reference.len {
            word(0)
        } else {
            u64::MAX
        };
        Ok(Comparison {
            mismatches,
            nans: word(1),
            rel_err,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_input_is_bounded_nonzero_and_seeded() {
        let a = random_input(100_000, 7);
        assert!(a.iter().all(|v| *v != 0.0 && (-1.0..=1.0).contains(v)));
        assert_eq!(a, random_input(100_000, 7));
        assert_ne!(a, random_input(100_000, 8));
        assert!(a.iter().any(|v| *v < -0.9) && a.iter().any(|v| *v > 0.9));
    }

    #[test]
    fn transpose_reference_on_a_known_matrix() {
        // 2 x 3 → 3 x 2
        let out = transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3);
        assert_eq!(out, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let shape = Shape {
            dims: vec![67, 131],
        };
        let input = random_input(67 * 131, 1);
        let t = cpu_reference("transpose", &shape, &[&input]).unwrap();
        let back = transpose(&t, 131, 67);
        assert_eq!(back, input);
    }

    #[test]
    fn matmul_reference_on_known_matrices() {
        // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
        let shape = Shape {
            dims: vec![2, 2, 2],
        };
        let c = cpu_reference(
            "matmul",
            &shape,
            &[&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]],
        )
        .unwrap();
        assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
        // 2x3 · 3x1
        let shape = Shape {
            dims: vec![2, 1, 3],
        };
        let c = cpu_reference(
            "matmul",
            &shape,
            &[&[1.0, 0.5, -1.0, 2.0, 0.0, 4.0], &[2.0, 4.0, 1.0]],
        )
        .unwrap();
        assert_eq!(c, vec![3.0, 8.0]);
        // Against the identity.
        let n = 17;
        let a = random_input(n * n, 3);
        let mut eye = vec![0f32; n * n];
        (0..n).for_each(|i| eye[i * n + i] = 1.0);
        let c = cpu_reference(
            "matmul",
            &Shape {
                dims: vec![n as u64; 3],
            },
            &[&a, &eye],
        )
        .unwrap();
        assert_eq!(c, a);
    }

    #[test]
    fn spot_check_accepts_the_truth_and_catches_an_error() {
        let (m, n, k) = (40usize, 24usize, 33usize);
        let a = random_input(m * k, 1);
        let b = random_input(k * n, 2);
        let shape = Shape {
            dims: vec![m as u64, n as u64, k as u64],
        };
        let mut c = cpu_reference("matmul", &shape, &[&a, &b]).unwrap();
        assert!(spot_check("matmul", &shape, &[&a, &b], &c, 9).is_ok());
        // Corrupt the last row (always sampled).
        c[(m - 1) * n + 3] += 0.5;
        assert!(spot_check("matmul", &shape, &[&a, &b], &c, 9).is_err());
    }

    #[test]
    fn judging_exact_and_tolerance() {
        let ok = Comparison {
            mismatches: 0,
            nans: 0,
            rel_err: 0.0,
        };
        assert!(ok.judge(Compare::Exact, 0.0, 10).is_ok());
        let bad = Comparison {
            mismatches: 3,
            nans: 3,
            rel_err: f64::NAN,
        };
        assert!(bad
            .judge(Compare::Exact, 0.0, 10)
            .unwrap_err()
            .contains("3 of 10"));
        assert!(
            bad.judge(Compare::Tolerance, 1e-4, 10).is_err(),
            "NaN never passes"
        );
        let close = Comparison {
            mismatches: 10,
            nans: 0,
            rel_err: 5e-7,
        };
        assert!(close.judge(Compare::Tolerance, 1e-4, 10).is_ok());
        assert!(close.judge(Compare::Exact, 1e-4, 10).is_err());
        let far = Comparison {
            mismatches: 10,
            nans: 0,
            rel_err: 2e-3,
        };
        assert!(far.judge(Compare::Tolerance, 1e-4, 10).is_err());
    }
}
