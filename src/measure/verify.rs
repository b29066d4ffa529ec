//! Verification: inputs that cannot hide bugs (uniform in [-1, 1], never zero, never NaN, of
//! the run's element type), the expected output from the CPU references registered in
//! [`crate::spec::reference`], and a comparison kernel that checks a variant's output on the
//! GPU against the reference so only 32 bytes of counters come back per variant, whatever the
//! shape. Host data is raw little-endian bytes, so every element size shares one path.

use crate::cuda::gpu::{Arg, Buffer, Gpu, GpuFault, GpuResult, Kernel};
use crate::model::dtype::Dtype;
use crate::model::limits::LaunchDims;
use crate::spec::ops::Compare;
use rand::{Rng, SeedableRng};

/// 32-bit pattern that outputs are filled with before a verification launch, so an element
/// the kernel never wrote cannot pass. Read as f32 (0x7ff87ff8), as two f16 (0x7ff8 each) or,
/// repeated, as f64 (0x7ff87ff87ff87ff8) it is a NaN, so the poison is a NaN of every type.
pub const NAN_BITS: u32 = 0x7ff8_7ff8;

/// How many of the `elem_bytes`-wide elements of `bytes` still hold the poison
/// ([`NAN_BITS`]): elements a kernel never wrote.
pub fn unwritten(bytes: &[u8], elem_bytes: usize) -> usize {
    let poison = NAN_BITS.to_le_bytes();
    bytes
        .chunks_exact(elem_bytes.max(1))
        .filter(|e| e.iter().enumerate().all(|(i, b)| *b == poison[i % 4]))
        .count()
}

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
    use crate::model::shape::Shape;
    use crate::spec::reference::{self, f32_values};

    #[test]
    fn random_input_is_bounded_nonzero_and_seeded() {
        let a = random_input(100_000, 7);
        assert!(a.iter().all(|v| *v != 0.0 && (-1.0..=1.0).contains(v)));
        assert_eq!(a, random_input(100_000, 7));
        assert_ne!(a, random_input(100_000, 8));
        assert!(a.iter().any(|v| *v < -0.9) && a.iter().any(|v| *v > 0.9));
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
    fn unwritten_elements_are_counted_in_every_width() {
        let poison = NAN_BITS.to_le_bytes();
        // f32: one of three elements never written.
        let f32s = [1.0f32.to_le_bytes(), poison, 2.0f32.to_le_bytes()].concat();
        assert_eq!(unwritten(&f32s, 4), 1);
        // f16: each half of the pattern is an unwritten element; a written half is not.
        let halves = [poison.to_vec(), vec![0, 0x3c, poison[2], poison[3]]].concat();
        assert_eq!(unwritten(&halves, 2), 3);
        // f64: the pattern twice; half of it is a written value.
        let f64s = [poison, poison, poison, 0u32.to_le_bytes()].concat();
        assert_eq!(unwritten(&f64s, 8), 1);
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

    /// The expected output and the spot check are the registry's: by name, with its types.
    #[test]
    fn references_come_from_the_registry() {
        let shape = Shape { dims: vec![2, 3] };
        let input = random_bytes(Dtype::Bf16, 6, 1);
        let out = reference::compute("transpose", &shape, Dtype::Bf16, &[&input]).unwrap();
        assert_eq!(out, reference::transpose::transpose_bytes(&input, 2, 3, 2));
        assert_eq!(
            reference::compute("copy", &shape, Dtype::Bf16, &[&input]).unwrap(),
            input
        );
        let e = reference::compute("matmul", &shape, Dtype::F64, &[&input]).unwrap_err();
        assert!(e.to_string().contains("computes f32 only"), "{e}");
        let e = reference::compute("config", &shape, Dtype::F32, &[&input]).unwrap_err();
        assert!(
            e.to_string().contains("no CPU reference named 'config'"),
            "{e}"
        );
        let e = reference::spot_check("transpose", &shape, &[&input], &out, 1).unwrap_err();
        assert!(e.to_string().contains("no CPU spot check"), "{e}");
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
