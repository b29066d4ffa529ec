//! `reference = "matmul"`: C (M x N) = A (M x K) · B (K x N), row-major, in float64 from
//! float32 inputs. At large shapes the expected output is computed on the GPU
//! (`reference_kernel`) and [`spot_check`]ed against rows of this one.

use super::{f32_values, Reference};
use crate::error::{Error, Result};
use crate::model::dtype::Dtype;
use crate::model::shape::Shape;
use rand::{Rng, SeedableRng};

pub const INFO: Reference = Reference {
    name: "matmul",
    about: "float64 product of float32 A (M x K) and B (K x N)",
    dtypes: &[Dtype::F32],
    compute,
    spot_check: Some(spot_check),
};

fn compute(shape: &Shape, _: Dtype, inputs: &[&[u8]]) -> Option<Vec<u8>> {
    let (&[m, n, k], &[a, b]) = (shape.dims.as_slice(), inputs) else {
        return None;
    };
    let rows: Vec<usize> = (0..m as usize).collect();
    let (a, b) = (f32_values(a), f32_values(b));
    let c = matmul_rows_f64(&a, &b, n as usize, k as usize, &rows);
    Some(c.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect())
}

/// Rows `rows` of C = A·B in float64, concatenated (A is ? x k, B is k x n, row-major), the
/// rows shared out over the cores: a spot check of 8 rows at 32x8192x8192 is half a billion
/// multiply-adds.
pub fn matmul_rows_f64(a: &[f32], b: &[f32], n: usize, k: usize, rows: &[usize]) -> Vec<f64> {
    let mut out = vec![0f64; rows.len() * n];
    if n == 0 || rows.is_empty() {
        return out;
    }
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let per_thread = rows.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (block, rows) in out.chunks_mut(per_thread * n).zip(rows.chunks(per_thread)) {
            scope.spawn(move || {
                for (c, &r) in block.chunks_mut(n).zip(rows) {
                    for (kk, &av) in a[r * k..(r + 1) * k].iter().enumerate() {
                        let av = f64::from(av);
                        for (cv, &bv) in c.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                            *cv += av * f64::from(bv);
                        }
                    }
                }
            });
        }
    });
    out
}

/// Checks a reference computed on the GPU against float64 rows computed on the CPU: the first
/// and last row and 6 seeded random ones. Inputs and reference are raw float32 bytes.
fn spot_check(
    shape: &Shape,
    inputs: &[&[u8]],
    gpu_reference: &[u8],
    seed: u64,
) -> Option<Result<String>> {
    let (&[m, n, k], &[a, b]) = (shape.dims.as_slice(), inputs) else {
        return None;
    };
    let (a, b, gpu_reference) = (f32_values(a), f32_values(b), f32_values(gpu_reference));
    let (a, b) = (a.as_slice(), b.as_slice());
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
            return Some(Err(Error::Cuda {
                during: "checking the GPU float64 reference".into(),
                why: format!(
                    "row {r} differs from the CPU float64 result by relative error {rel:.2e}"
                ),
            }));
        }
    }
    Some(Ok(format!(
        "float64 GPU reference, spot-checked against float64 CPU rows {rows:?}"
    )))
}

#[cfg(test)]
mod tests {
    use super::super::{compute, f32_bytes, spot_check};
    use super::*;

    /// `n` float32 values in [-1, 1] from `seed` (a test's inputs).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(-1.0f32..=1.0)).collect()
    }

    /// The matmul reference on float32 matrices given as values (the host data are bytes).
    fn matmul_ref(shape: &Shape, a: &[f32], b: &[f32]) -> Vec<f32> {
        let (a, b) = (f32_bytes(a), f32_bytes(b));
        f32_values(&compute("matmul", shape, Dtype::F32, &[&a, &b]).unwrap())
    }

    #[test]
    fn matmul_reference_on_known_matrices() {
        // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
        let shape = Shape {
            dims: vec![2, 2, 2],
        };
        let c = matmul_ref(&shape, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
        // 2x3 · 3x1
        let shape = Shape {
            dims: vec![2, 1, 3],
        };
        let c = matmul_ref(&shape, &[1.0, 0.5, -1.0, 2.0, 0.0, 4.0], &[2.0, 4.0, 1.0]);
        assert_eq!(c, vec![3.0, 8.0]);
        // Against the identity.
        let n = 17;
        let a = values(n * n, 3);
        let mut eye = vec![0f32; n * n];
        (0..n).for_each(|i| eye[i * n + i] = 1.0);
        let c = matmul_ref(
            &Shape {
                dims: vec![n as u64; 3],
            },
            &a,
            &eye,
        );
        assert_eq!(c, a);
    }

    #[test]
    fn spot_check_accepts_the_truth_and_catches_an_error() {
        let (m, n, k) = (40usize, 24usize, 33usize);
        let a = f32_bytes(&values(m * k, 1));
        let b = f32_bytes(&values(k * n, 2));
        let shape = Shape {
            dims: vec![m as u64, n as u64, k as u64],
        };
        let c = compute("matmul", &shape, Dtype::F32, &[&a, &b]).unwrap();
        assert!(spot_check("matmul", &shape, &[&a, &b], &c, 9).is_ok());
        // Corrupt the last row (always sampled).
        let mut values = f32_values(&c);
        values[(m - 1) * n + 3] += 0.5;
        let c = f32_bytes(&values);
        assert!(spot_check("matmul", &shape, &[&a, &b], &c, 9).is_err());
    }
}
