//! Verification: inputs that cannot hide bugs (uniform in [-1, 1], never zero, never NaN, of
//! the run's element type), CPU references, and a comparison kernel that checks a variant's
//! output on the GPU against the reference so only 32 bytes of counters come back per variant,
//! whatever the shape. Host data is raw little-endian bytes, so every element size shares one
//! path; only the matmul reference does arithmetic (in float64, on float32 inputs).

use crate::cuda::gpu::{Arg, Buffer, Gpu, GpuFault, GpuResult, Kernel};
use crate::error::{Error, Result};
use crate::model::dtype::Dtype;
use crate::model::limits::LaunchDims;
use crate::model::shape::Shape;
use crate::spec::ops::{reference_supports, Compare};
use rand::{Rng, SeedableRng};

/// 32-bit pattern that outputs are filled with before a verification launch, so an element
/// the kernel never wrote cannot pass. Read as f32 (0x7ff87ff8), as two f16 (0x7ff8 each) or,
/// repeated, as f64 (0x7ff87ff87ff87ff8) it is a NaN, so the poison is a NaN of every type.
pub const NAN_BITS: u32 = 0x7ff8_7ff8;

/// Draws until `draw` gives a value that `is_zero` does not reject.
fn nonzero<T>(mut draw: impl FnMut() -> T, is_zero: impl Fn(&T) -> bool) -> T {
    loop {
        let v = draw();
        if !is_zero(&v) {
            return v;
        }
    }
}

/// `n` float32 values uniform in [-1, 1], none exactly zero (zeros hide unwritten outputs).
pub fn random_input(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| nonzero(|| rng.random_range(-1.0f32..=1.0), |v| *v == 0.0))
        .collect()
}

/// `n` values of `dtype` uniform in [-1, 1], as raw little-endian bytes; none is zero (a zero
/// hides an unwritten output) or NaN (a NaN compares unequal to itself). f16 values are
/// float32 draws rounded to the nearest half, redrawn when that rounds to zero.
///
/// Filled in chunks of [`FILL_CHUNK`] elements on every core: an 8192x8192 input took 0.6 s
/// on one core, in every run. Each chunk has its own seed (the first is `seed` itself), so the
/// values depend on the seed alone, not on the number of cores.
pub fn random_bytes(dtype: Dtype, n: usize, seed: u64) -> Vec<u8> {
    let size = dtype.bytes();
    let mut out = vec![0u8; n * size];
    let mut chunks: Vec<(usize, &mut [u8])> =
        out.chunks_mut(FILL_CHUNK * size).enumerate().collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .clamp(1, chunks.len().max(1));
    let per_thread = chunks.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        while !chunks.is_empty() {
            let group: Vec<(usize, &mut [u8])> =
                chunks.drain(..per_thread.min(chunks.len())).collect();
            scope.spawn(move || {
                for (c, part) in group {
                    fill_chunk(dtype, part, chunk_seed(seed, c));
                }
            });
        }
    });
    out
}

/// Elements per separately seeded chunk of a random input.
pub const FILL_CHUNK: usize = 1 << 20;

/// The seed of chunk `c` of an input seeded `seed`.
fn chunk_seed(seed: u64, c: usize) -> u64 {
    match c {
        0 => seed,
        _ => seed ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    }
}

/// Fills `out` (whole elements of `dtype`) with random values seeded `seed`.
fn fill_chunk(dtype: Dtype, out: &mut [u8], seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for slot in out.chunks_exact_mut(dtype.bytes()) {
        match dtype {
            Dtype::F32 => {
                let v = nonzero(|| rng.random_range(-1.0f32..=1.0), |v| *v == 0.0);
                slot.copy_from_slice(&v.to_le_bytes());
            }
            Dtype::F64 => {
                let v = nonzero(|| rng.random_range(-1.0f64..=1.0), |v| *v == 0.0);
                slot.copy_from_slice(&v.to_le_bytes());
            }
            Dtype::F16 => {
                let v = nonzero(
                    || half::f16::from_f32(rng.random_range(-1.0f32..=1.0)),
                    |v| v.to_f32() == 0.0,
                );
                slot.copy_from_slice(&v.to_le_bytes());
            }
            Dtype::Bf16 => {
                let v = nonzero(
                    || half::bf16::from_f32(rng.random_range(-1.0f32..=1.0)),
                    |v| v.to_f32() == 0.0,
                );
                slot.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// One value of `dtype` as raw little-endian bytes (for the fills that are not random).
fn value_bytes(dtype: Dtype, v: f64) -> Vec<u8> {
    match dtype {
        Dtype::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        Dtype::Bf16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
        Dtype::F64 => v.to_le_bytes().to_vec(),
    }
}

/// Fills an input buffer of `n` elements of `dtype` as its spec says, as raw bytes. Iota
/// counts modulo 1024, which every type holds exactly.
pub fn fill_input(fill: crate::spec::ops::Fill, dtype: Dtype, n: usize, seed: u64) -> Vec<u8> {
    match fill {
        crate::spec::ops::Fill::Uniform => random_bytes(dtype, n, seed),
        crate::spec::ops::Fill::Ones => value_bytes(dtype, 1.0).repeat(n),
        crate::spec::ops::Fill::Iota => (0..n)
            .flat_map(|i| value_bytes(dtype, (i % 1024) as f64))
            .collect(),
    }
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

/// Computes an op's expected output on the CPU, as raw bytes of `dtype`. `inputs` are the
/// op's input buffers in spec order, raw bytes of `dtype` too.
pub fn cpu_reference(name: &str, shape: &Shape, dtype: Dtype, inputs: &[&[u8]]) -> Result<Vec<u8>> {
    if !reference_supports(name, dtype) {
        return Err(Error::Usage(format!(
            "the CPU reference '{name}' computes f32 only, not {dtype}"
        )));
    }
    match (name, shape.dims.as_slice(), inputs) {
        ("transpose", &[rows, cols], &[input]) => Ok(transpose_bytes(
            input,
            rows as usize,
            cols as usize,
            dtype.bytes(),
        )),
        ("matmul", &[m, n, k], &[a, b]) => {
            let rows: Vec<usize> = (0..m as usize).collect();
            let (a, b) = (f32_values(a), f32_values(b));
            let c = matmul_rows_f64(&a, &b, n as usize, k as usize, &rows);
            Ok(c.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect())
        }
        _ => Err(Error::Usage(format!(
            "no CPU reference named '{name}' for a {}-dimensional shape with {} input(s)",
            shape.dims.len(),
            inputs.len()
        ))),
    }
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
/// and last row and `samples` seeded random ones. Returns a description of what was checked.
/// Inputs and reference are raw float32 bytes (the matmul reference is float32 only).
pub fn spot_check(
    name: &str,
    shape: &Shape,
    inputs: &[&[u8]],
    gpu_reference: &[u8],
    seed: u64,
) -> Result<String> {
    let (&[m, n, k], &[a, b], "matmul") = (shape.dims.as_slice(), inputs, name) else {
        return Err(Error::Usage(format!(
            "no CPU spot check named '{name}' for this shape"
        )));
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

/// out (cols x rows) = in (rows x cols) transposed, row-major, float32.
pub fn transpose(input: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    f32_values(&transpose_bytes(&f32_bytes(input), rows, cols, 4))
}

/// out (cols x rows) = in (rows x cols) transposed, row-major, for elements of `elem` bytes
/// (raw bytes in and out: a transpose only moves bits, whatever the type).
pub fn transpose_bytes(input: &[u8], rows: usize, cols: usize, elem: usize) -> Vec<u8> {
    match elem {
        2 => transpose_fixed::<2>(input, rows, cols),
        4 => transpose_fixed::<4>(input, rows, cols),
        8 => transpose_fixed::<8>(input, rows, cols),
        _ => {
            let mut out = vec![0u8; rows * cols * elem];
            for r in 0..rows {
                for c in 0..cols {
                    let (to, from) = ((c * rows + r) * elem, (r * cols + c) * elem);
                    out[to..to + elem].copy_from_slice(&input[from..from + elem]);
                }
            }
            out
        }
    }
}

/// The transpose for one element size, known at compile time so each copy is one move.
fn transpose_fixed<const E: usize>(input: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; rows * cols * E];
    // Blocked so large matrices do not thrash the CPU cache.
    const B: usize = 64;
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            for r in r0..(r0 + B).min(rows) {
                for c in c0..(c0 + B).min(cols) {
                    let (to, from) = ((c * rows + r) * E, (r * cols + c) * E);
                    let elem: [u8; E] = input[from..from + E].try_into().expect("E bytes");
                    out[to..to + E].copy_from_slice(&elem);
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

/// CUDA source of the comparison kernels, one per element size: `ca_compare2` (f16),
/// `ca_compare4` (f32) and `ca_compare8` (f64). Each counts the elements whose raw bits differ
/// (the exact comparison, for any type) and the NaN outputs, and sums (out - ref)^2 and ref^2
/// in double for the relative error of tolerance comparisons.
pub const COMPARE_SOURCE: &str = r#"
__device__ __forceinline__ bool ca_is_nan(unsigned short b) { return (b & 0x7fffu) > 0x7c00u; }
__device__ __forceinline__ bool ca_is_nan(unsigned int b) { return (b & 0x7fffffffu) > 0x7f800000u; }
__device__ __forceinline__ bool ca_is_nan(unsigned long long b)
{
    return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
// The value of an IEEE half's bits (no cuda_fp16.h needed): subnormal, normal, inf or NaN.
__device__ __forceinline__ double ca_value(unsigned short b)
{
    const int e = (b >> 10) & 0x1f, m = b & 0x3ff;
    double v = e == 0 ? ldexp((double)m, -24)
             : e == 31 ? (m ? __longlong_as_double(0x7ff8000000000000ll) : __longlong_as_double(0x7ff0000000000000ll))
             : ldexp((double)(m | 0x400), e - 25);
    return (b & 0x8000u) ? -v : v;
}
__device__ __forceinline__ double ca_value(unsigned int b) { return (double)__uint_as_float(b); }
__device__ __forceinline__ double ca_value(unsigned long long b) { return __longlong_as_double((long long)b); }

template <typename Bits>
__device__ __forceinline__ void ca_compare_bits(const Bits* __restrict__ out, const Bits* __restrict__ ref,
                                                unsigned long long n, unsigned long long* counts, double* sums)
{
    unsigned long long mism = 0, nans = 0;
    double d2 = 0.0, r2 = 0.0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const Bits o = out[i], r = ref[i];
        mism += (o != r);
        nans += ca_is_nan(o);
        const double ov = ca_value(o), rv = ca_value(r);
        const double d = ov - rv;
        d2 += d * d;
        r2 += rv * rv;
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

#define CA_COMPARE(NAME, BITS) \
extern "C" __global__ void NAME(const BITS* __restrict__ out, const BITS* __restrict__ ref, \
                                unsigned long long n, unsigned long long* counts, double* sums) \
{ ca_compare_bits<BITS>(out, ref, n, counts, sums); }
CA_COMPARE(ca_compare2, unsigned short)
CA_COMPARE(ca_compare4, unsigned int)
CA_COMPARE(ca_compare8, unsigned long long)
"#;

/// Element sizes the comparison kernels handle, with their kernel names.
const COMPARE_KERNELS: [(usize, &str); 3] =
    [(2, "ca_compare2"), (4, "ca_compare4"), (8, "ca_compare8")];

/// The comparison kernels, loaded, with their 32-byte result buffer.
pub struct Checker {
    kernels: Vec<(usize, Kernel)>,
    result: Buffer,
    num_sms: u32,
}

impl Checker {
    pub fn new(gpu: &Gpu, cubin: &[u8]) -> GpuResult<Checker> {
        let kernels = COMPARE_KERNELS
            .iter()
            .map(|&(size, name)| Ok((size, gpu.load(cubin, name)?)))
            .collect::<GpuResult<Vec<_>>>()?;
        Ok(Checker {
            kernels,
            result: gpu.alloc(4, 8, "the comparison counters")?,
            num_sms: gpu.info.limits.num_sms.max(1) as u32,
        })
    }

    /// Compares `out` with `reference` element by element on the GPU. Buffers of different
    /// lengths or element sizes never match.
    pub fn compare(&self, gpu: &Gpu, out: &Buffer, reference: &Buffer) -> GpuResult<Comparison> {
        let Some((_, kernel)) = self
            .kernels
            .iter()
            .find(|(size, _)| *size == out.elem_bytes)
        else {
            return Err(GpuFault::unsupported(format!(
                "comparing elements of {} bytes",
                out.elem_bytes
            )));
        };
        gpu.fill_u32(&self.result, 0)?;
        let n = out.len.min(reference.len) as u64;
        let blocks = n.div_ceil(256).clamp(1, u64::from(self.num_sms) * 8) as u32;
        let dims = LaunchDims {
            grid: (blocks, 1, 1),
            block: (256, 1, 1),
            shared: 0,
        };
        let args = [
            Arg::Ptr(out.ptr),
            Arg::Ptr(reference.ptr),
            Arg::U64(n),
            Arg::Ptr(self.result.ptr),
            Arg::Ptr(self.result.ptr + 16),
        ];
        gpu.launch(kernel, dims, &args)?;
        let raw = gpu.download(&self.result)?;
        Ok(Comparison::from_counters(
            &raw,
            out.len == reference.len && out.elem_bytes == reference.elem_bytes,
        ))
    }
}

impl Comparison {
    /// Reads the kernel's 32 bytes of counters: mismatches and NaNs (u64), then the sums of
    /// squared differences and of squared reference values (f64). `same_layout` false (the
    /// buffers differ in length or element size) counts every element as a mismatch.
    pub fn from_counters(raw: &[u8], same_layout: bool) -> Comparison {
        let word = |i: usize| {
            raw.get(8 * i..8 * i + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .unwrap_or(u64::MAX)
        };
        let (d2, r2) = (f64::from_bits(word(2)), f64::from_bits(word(3)));
        let rel_err = if r2 > 0.0 {
            (d2 / r2).sqrt()
        } else {
            d2.sqrt()
        };
        Comparison {
            mismatches: if same_layout { word(0) } else { u64::MAX },
            nans: word(1),
            rel_err,
        }
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
        let input = random_bytes(Dtype::F32, 67 * 131, 1);
        let t = cpu_reference("transpose", &shape, Dtype::F32, &[&input]).unwrap();
        assert_eq!(transpose_bytes(&t, 131, 67, 4), input);
    }

    #[test]
    fn transpose_reference_for_every_element_size() {
        // Elements numbered by position, in each size: out[c][r] must be in[r][c].
        let (rows, cols) = (67usize, 131usize);
        for elem in [1usize, 2, 4, 8, 3, 16] {
            let input: Vec<u8> = (0..rows * cols)
                .flat_map(|i| {
                    let mut e = vec![0u8; elem];
                    for (b, slot) in e.iter_mut().enumerate() {
                        *slot = (i >> (8 * (b % 4))) as u8 ^ (b as u8).wrapping_mul(37);
                    }
                    e
                })
                .collect();
            let out = transpose_bytes(&input, rows, cols, elem);
            assert_eq!(out.len(), input.len(), "{elem}-byte elements");
            for r in 0..rows {
                for c in 0..cols {
                    let from = (r * cols + c) * elem;
                    let to = (c * rows + r) * elem;
                    assert_eq!(
                        out[to..to + elem],
                        input[from..from + elem],
                        "{elem} B at {r},{c}"
                    );
                }
            }
            assert_eq!(
                transpose_bytes(&out, cols, rows, elem),
                input,
                "{elem} B round trip"
            );
        }
        for dtype in crate::model::dtype::ALL {
            let shape = Shape { dims: vec![5, 3] };
            let input = random_bytes(dtype, 15, 4);
            let out = cpu_reference("transpose", &shape, dtype, &[&input]).unwrap();
            assert_eq!(out, transpose_bytes(&input, 5, 3, dtype.bytes()), "{dtype}");
            assert_ne!(out, input, "{dtype}: a 5x3 transpose moves elements");
        }
    }

    #[test]
    fn host_fills_are_never_zero_or_nan_in_any_dtype() {
        use crate::spec::ops::Fill;
        let n = 200_000;
        for dtype in crate::model::dtype::ALL {
            let bytes = fill_input(Fill::Uniform, dtype, n, 7);
            assert_eq!(bytes.len(), n * dtype.bytes(), "{dtype}");
            let values: Vec<f64> = match dtype {
                Dtype::F16 => bytes
                    .chunks_exact(2)
                    .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
                    .collect(),
                Dtype::Bf16 => bytes
                    .chunks_exact(2)
                    .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
                    .collect(),
                Dtype::F32 => f32_values(&bytes).into_iter().map(f64::from).collect(),
                Dtype::F64 => bytes
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            };
            assert!(
                values
                    .iter()
                    .all(|v| *v != 0.0 && !v.is_nan() && (-1.0..=1.0).contains(v)),
                "{dtype}: a zero, NaN or out-of-range input"
            );
            assert!(
                values.iter().any(|v| *v < -0.9) && values.iter().any(|v| *v > 0.9),
                "{dtype}: not spread over [-1, 1]"
            );
            // Small magnitudes too (they round to subnormals or zero in f16: redrawn).
            assert!(values.iter().any(|v| v.abs() < 1e-3), "{dtype}");
            assert_eq!(
                bytes,
                fill_input(Fill::Uniform, dtype, n, 7),
                "{dtype}: seeded"
            );
            assert_ne!(bytes, fill_input(Fill::Uniform, dtype, n, 8), "{dtype}");
            let ones = fill_input(Fill::Ones, dtype, 3, 0);
            let iota = fill_input(Fill::Iota, dtype, 1030, 0);
            assert_eq!(ones.len(), 3 * dtype.bytes());
            assert_eq!(iota.len(), 1030 * dtype.bytes());
            assert_eq!(
                ones[..dtype.bytes()],
                iota[dtype.bytes()..2 * dtype.bytes()],
                "{dtype}: 1"
            );
        }
        assert_eq!(
            f32_values(&fill_input(Fill::Ones, Dtype::F32, 2, 0)),
            vec![1.0, 1.0]
        );
        assert_eq!(
            fill_input(Fill::Ones, Dtype::F16, 1, 0),
            vec![0x00, 0x3c],
            "f16 1.0"
        );
        // A large input is filled chunk by chunk: its first chunk is what a small input of
        // the same seed holds, and the next chunk draws other values.
        let big = fill_input(Fill::Uniform, Dtype::F32, FILL_CHUNK + 16, 5);
        let small = fill_input(Fill::Uniform, Dtype::F32, 16, 5);
        assert_eq!(big[..64], small[..]);
        assert_ne!(big[4 * FILL_CHUNK..], small[..]);
        // Float32 fills are the values the float32-only data path made before dtypes.
        assert_eq!(
            f32_values(&fill_input(Fill::Uniform, Dtype::F32, 1000, 3)),
            random_input(1000, 3)
        );
    }

    #[test]
    fn the_poison_is_a_nan_of_every_dtype() {
        let b = NAN_BITS.to_le_bytes();
        assert!(f32::from_le_bytes(b).is_nan());
        assert!(half::f16::from_le_bytes([b[0], b[1]]).is_nan());
        assert!(half::f16::from_le_bytes([b[2], b[3]]).is_nan());
        let wide = [b, b].concat();
        assert!(f64::from_le_bytes(wide.try_into().unwrap()).is_nan());
    }

    #[test]
    fn counters_read_back_as_a_comparison() {
        let raw: Vec<u8> = [3u64, 1]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .chain(
                [4.0f64, 16.0]
                    .iter()
                    .flat_map(|x| x.to_bits().to_le_bytes()),
            )
            .collect();
        let c = Comparison::from_counters(&raw, true);
        assert_eq!((c.mismatches, c.nans, c.rel_err), (3, 1, 0.5));
        let c = Comparison::from_counters(&raw, false);
        assert_eq!(
            c.mismatches,
            u64::MAX,
            "buffers of another layout never match"
        );
        let c = Comparison::from_counters(&raw[..8], true);
        assert!(
            c.rel_err.is_nan(),
            "missing counters never pass a tolerance"
        );
    }

    #[test]
    fn matmul_reference_is_f32_only() {
        assert!(reference_supports("transpose", Dtype::F64));
        assert!(reference_supports("config", Dtype::F16));
        assert!(reference_supports("matmul", Dtype::F32));
        assert!(!reference_supports("matmul", Dtype::F64));
        let shape = Shape {
            dims: vec![1, 1, 1],
        };
        let one = 1.0f64.to_le_bytes();
        let e = cpu_reference("matmul", &shape, Dtype::F64, &[&one, &one]).unwrap_err();
        assert!(e.to_string().contains("f32 only"), "{e}");
    }

    /// The matmul reference on float32 matrices given as values (the host data are bytes).
    fn matmul_ref(shape: &Shape, a: &[f32], b: &[f32]) -> Vec<f32> {
        let (a, b) = (f32_bytes(a), f32_bytes(b));
        f32_values(&cpu_reference("matmul", shape, Dtype::F32, &[&a, &b]).unwrap())
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
        let a = random_input(n * n, 3);
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
        let a = f32_bytes(&random_input(m * k, 1));
        let b = f32_bytes(&random_input(k * n, 2));
        let shape = Shape {
            dims: vec![m as u64, n as u64, k as u64],
        };
        let c = cpu_reference("matmul", &shape, Dtype::F32, &[&a, &b]).unwrap();
        assert!(spot_check("matmul", &shape, &[&a, &b], &c, 9).is_ok());
        // Corrupt the last row (always sampled).
        let mut values = f32_values(&c);
        values[(m - 1) * n + 3] += 0.5;
        let c = f32_bytes(&values);
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
