//! The one place that talks to the CUDA driver (through cudarc): context, stream, buffers,
//! module loading, launches, timing events. The rest of the tuner sees plain Rust values and
//! [`GpuFault`]s that say whether the context survived.

use crate::error::{Error, Result};
use crate::model::limits::{DeviceLimits, LaunchDims};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUresult};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use std::sync::Arc;

/// A failed CUDA call. `sticky` errors (illegal address, a trap, a launch failure) poison the
/// context: every later call in it fails, so the tuner must start a fresh one.
#[derive(Debug, Clone)]
pub struct GpuFault {
    pub during: String,
    /// The driver's error code; private, so the driver's types stay in this module.
    code: CUresult,
    pub sticky: bool,
}

impl GpuFault {
    /// A request the driver was never given because this device or build cannot serve it
    /// (reported as `CUDA_ERROR_NOT_SUPPORTED`; the context stays usable).
    pub fn unsupported(during: impl Into<String>) -> GpuFault {
        GpuFault {
            during: during.into(),
            code: CUresult::CUDA_ERROR_NOT_SUPPORTED,
            sticky: false,
        }
    }
}

impl std::fmt::Display for GpuFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed with {:?}", self.during, self.code)?;
        if self.sticky {
            f.write_str(" (context lost)")?;
        }
        Ok(())
    }
}

impl From<GpuFault> for Error {
    fn from(f: GpuFault) -> Error {
        Error::Cuda {
            during: f.during.clone(),
            why: format!("{:?}", f.code),
        }
    }
}

fn is_sticky(code: CUresult) -> bool {
    use CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

/// Attaches what was being done to a driver error.
pub fn fault(during: impl Into<String>) -> impl FnOnce(cudarc::driver::DriverError) -> GpuFault {
    let during = during.into();
    move |e| GpuFault {
        during,
        code: e.0,
        sticky: is_sticky(e.0),
    }
}

pub type GpuResult<T> = std::result::Result<T, GpuFault>;

/// What the tuner records about the device.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub uuid: String,
    pub compute_capability: (i32, i32),
    pub limits: DeviceLimits,
    pub l2_bytes: usize,
    pub total_mem: usize,
    pub driver_version: i32,
}

impl DeviceInfo {
    /// `sm_90` for compute capability 9.0: the NVRTC target for this device.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }

    /// `9.0`: the compute capability as the CSVs' `compute_capability` column holds it.
    pub fn cc_string(&self) -> String {
        format!(
            "{}.{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }

    /// `13.0` from the driver's 13000: the CUDA version the driver supports (what the
    /// `driver` column of the CSVs holds), not its release number.
    pub fn driver_string(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }
}

/// A device buffer of `len` elements of `elem_bytes` bytes each, with its raw address (kernel
/// arguments are raw addresses). The allocation is rounded up to whole 32-bit words, so
/// [`Gpu::fill_u32`] can poison every element of any size.
pub struct Buffer {
    slice: CudaSlice<u8>,
    pub ptr: u64,
    pub len: usize,
    pub elem_bytes: usize,
}

impl Buffer {
    /// Bytes of data (`len` elements).
    pub fn bytes(&self) -> usize {
        self.len * self.elem_bytes
    }

    /// 32-bit words allocated: the data rounded up.
    fn words(&self) -> usize {
        self.slice.len() / 4
    }
}

/// A kernel loaded into the context.
pub struct Kernel {
    func: CudaFunction,
    pub registers: i32,
    /// Dynamic shared memory this function may take per launch: the driver's default (48 KB)
    /// until a launch asks for more and [`Gpu::launch`] raises it.
    shared_allowed: std::cell::Cell<u32>,
}

/// Dynamic shared memory every function may take without opting in, in bytes.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// An argument of a launch: a buffer address or a 32-bit integer.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    Ptr(u64),
    I32(i32),
    U64(u64),
}

/// One CUDA context on one device, with a single stream on which all work is ordered.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pub info: DeviceInfo,
}

impl Gpu {
    /// Opens device `ordinal`; fails with a readable message when there is no driver or GPU.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        // cudarc panics when libcuda is absent, so look for it first.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoGpu(
                "libcuda.so (the NVIDIA driver) could not be loaded; install the NVIDIA driver, \
                 or use --compile-only --arch sm_XX to compile without a GPU"
                    .into(),
            ));
        }
        let count = CudaContext::device_count().map_err(|e| {
            Error::NoGpu(format!(
                "cuInit failed with {:?} (use --compile-only to compile without a GPU)",
                e.0
            ))
        })?;
        if count <= 0 {
            return Err(Error::NoGpu(
                "the driver reports no CUDA device (use --compile-only to compile without a GPU)"
                    .into(),
            ));
        }
        if ordinal >= count as usize {
            return Err(Error::NoGpu(format!(
                "--device {ordinal} does not exist: this machine has {count} CUDA device(s), 0..{}",
                count - 1
            )));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| Error::NoGpu(format!("context creation failed with {:?}", e.0)))?;
        // One stream, ordered work: cudarc's per-buffer event tracking only adds overhead.
        // A created stream, not the legacy default one, because batches of launches are
        // captured into CUDA graphs and the default stream cannot be captured.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| Error::NoGpu(format!("stream creation failed with {:?}", e.0)))?;
        let attr = |a: Attr| ctx.attribute(a).map_err(fault(format!("reading {a:?}")));
        let cc = ctx
            .compute_capability()
            .map_err(fault("reading the compute capability"))?;
        let uuid = ctx.uuid().map_err(fault("reading the UUID"))?;
        let mut driver_version = 0;
        unsafe { sys::cuDriverGetVersion(&mut driver_version) };
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(fault("reading the device name"))?,
            uuid: uuid
                .bytes
                .iter()
                .map(|b| format!("{:02x}", *b as u8))
                .collect(),
            compute_capability: cc,
            limits: DeviceLimits {
                max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?
                    as i64,
                max_shared_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?
                    as i64,
                num_sms: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as i64,
                max_shared_optin: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                    as i64,
                compute_capability: i64::from(cc.0 * 10 + cc.1),
            },
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
            total_mem: ctx.total_mem().map_err(fault("reading total memory"))?,
            driver_version,
        };
        Ok(Gpu { ctx, stream, info })
    }

    /// Free device memory in bytes.
    pub fn free_mem(&self) -> GpuResult<usize> {
        self.ctx
            .mem_get_info()
            .map(|(free, _)| free)
            .map_err(fault("cuMemGetInfo"))
    }

    /// A buffer of `len` elements of `elem_bytes` bytes.
    pub fn alloc(&self, len: usize, elem_bytes: usize, what: &str) -> GpuResult<Buffer> {
        let bytes = len.saturating_mul(elem_bytes).max(1).next_multiple_of(4);
        let slice = unsafe { self.stream.alloc::<u8>(bytes) }
            .map_err(fault(format!("allocating {what}")))?;
        let ptr = {
            let (ptr, _guard) = slice.device_ptr(&self.stream);
            ptr
        };
        Ok(Buffer {
            ptr,
            len,
            elem_bytes,
            slice,
        })
    }

    /// Copies raw bytes into the start of `dst` (at most its data size).
    pub fn upload(&self, host: &[u8], dst: &mut Buffer) -> GpuResult<()> {
        let n = host.len().min(dst.bytes());
        let mut view = dst.slice.slice_mut(0..n);
        self.stream
            .memcpy_htod(&host[..n], &mut view)
            .map_err(fault("copying to the device"))
    }

    /// The buffer's data as raw bytes.
    pub fn download(&self, src: &Buffer) -> GpuResult<Vec<u8>> {
        let mut host = vec![0u8; src.bytes()];
        self.stream
            .memcpy_dtoh(&src.slice.slice(0..src.bytes()), &mut host)
            .map_err(fault("copying to the host"))?;
        Ok(host)
    }

    /// Fills a whole buffer with a 32-bit pattern (NaN to poison outputs, anything to flush
    /// L2), whatever its element size.
    pub fn fill_u32(&self, buf: &Buffer, pattern: u32) -> GpuResult<()> {
        unsafe { sys::cuMemsetD32Async(buf.ptr, pattern, buf.words(), self.stream.cu_stream()) }
            .result()
            .map_err(fault("cuMemsetD32Async"))
    }

    /// Device-to-device copy of `bytes` bytes (the memcpy roof).
    pub fn copy(&self, dst: u64, src: u64, bytes: usize) -> GpuResult<()> {
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.stream.cu_stream()) }
            .result()
            .map_err(fault("cuMemcpyDtoDAsync"))
    }

    /// Loads a cubin and looks up one kernel in it.
    pub fn load(&self, cubin: &[u8], kernel: &str) -> GpuResult<Kernel> {
        let mut all = self.load_all(cubin, &[kernel])?;
        Ok(all.remove(0))
    }

    /// Loads a cubin once and looks up each of `kernels` in it (a variant and the prologue
    /// kernels it launches first), in that order.
    pub fn load_all(&self, cubin: &[u8], kernels: &[&str]) -> GpuResult<Vec<Kernel>> {
        let module = self
            .ctx
            .load_module(Ptx::from_binary(cubin.to_vec()))
            .map_err(fault("loading the module"))?;
        kernels
            .iter()
            .map(|kernel| {
                let func = module
                    .load_function(kernel)
                    .map_err(fault(format!("finding kernel {kernel}")))?;
                let mut registers = 0;
                unsafe {
                    sys::cuFuncGetAttribute(
                        &mut registers,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                        func.cu_function(),
                    )
                };
                Ok(Kernel {
                    func,
                    registers,
                    shared_allowed: std::cell::Cell::new(DEFAULT_DYNAMIC_SHARED),
                })
            })
            .collect()
    }

    /// Enqueues one launch; errors from the launch itself (bad geometry, too many resources)
    /// are returned here, faults inside the kernel at the next synchronize.
    pub fn launch(&self, kernel: &Kernel, dims: LaunchDims, args: &[Arg]) -> GpuResult<()> {
        if dims.shared > kernel.shared_allowed.get() {
            // Past 48 KB a kernel must opt in, once per function (not per launch: the timed
            // loops should not pay a driver call each).
            kernel
                .func
                .set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dims.shared as i32,
                )
                .map_err(fault(format!(
                    "allowing {} bytes of dynamic shared memory",
                    dims.shared
                )))?;
            kernel.shared_allowed.set(dims.shared);
        }
        // The builder keeps references to the values, so they live in these two vectors.
        let wide: Vec<u64> = args
            .iter()
            .map(|a| match a {
                Arg::Ptr(p) | Arg::U64(p) => *p,
                Arg::I32(_) => 0,
            })
            .collect();
        let ints: Vec<i32> = args
            .iter()
            .map(|a| if let Arg::I32(i) = a { *i } else { 0 })
            .collect();
        let mut builder = self.stream.launch_builder(&kernel.func);
        for (i, a) in args.iter().enumerate() {
            match a {
                Arg::Ptr(_) | Arg::U64(_) => builder.arg(&wide[i]),
                Arg::I32(_) => builder.arg(&ints[i]),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: dims.grid,
            block_dim: dims.block,
            shared_mem_bytes: dims.shared,
        };
        unsafe { builder.launch(cfg) }
            .map(|_| ())
            .map_err(fault("launching the kernel"))
    }

    pub fn synchronize(&self, during: &str) -> GpuResult<()> {
        self.stream.synchronize().map_err(fault(during))
    }

    /// `n` pairs of events with timing enabled (cudarc's default events have timing disabled).
    pub fn timing_events(&self, n: usize) -> GpuResult<Vec<EventPair>> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        (0..n)
            .map(|_| {
                let a = self
                    .ctx
                    .new_event(flags)
                    .map_err(fault("creating an event"))?;
                let b = self
                    .ctx
                    .new_event(flags)
                    .map_err(fault("creating an event"))?;
                Ok((TimingEvent(a), TimingEvent(b)))
            })
            .collect()
    }

    /// Captures what `enqueue` puts on the stream into a CUDA graph instead of running it,
    /// so the whole batch later goes to the GPU as one launch ([`Gpu::launch_batch`]) with no
    /// host overhead between its kernels. A failed capture leaves the stream usable.
    pub fn capture(&self, enqueue: impl FnOnce() -> GpuResult<()>) -> GpuResult<Batch> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(fault("starting a stream capture"))?;
        let queued = enqueue();
        let graph = self
            .stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(fault("capturing a batch of launches"));
        queued?;
        let graph = graph?.ok_or_else(|| GpuFault::unsupported("capturing an empty batch"))?;
        graph
            .upload()
            .map_err(fault("uploading a captured batch"))?;
        Ok(Batch(graph))
    }

    /// Enqueues a captured batch on the stream.
    pub fn launch_batch(&self, batch: &Batch) -> GpuResult<()> {
        batch
            .0
            .launch()
            .map_err(fault("launching a captured batch"))
    }

    pub fn record(&self, event: &TimingEvent) -> GpuResult<()> {
        event
            .0
            .record(&self.stream)
            .map_err(fault("recording an event"))
    }
}

/// Launches captured into a CUDA graph by [`Gpu::capture`]. Opaque: the driver's graph type
/// stays in this module.
pub struct Batch(cudarc::driver::CudaGraph);

/// An event with timing enabled, recorded on the stream with [`Gpu::record`]. Opaque: the
/// driver's event type stays in this module.
pub struct TimingEvent(CudaEvent);

/// A start and an end event around one timed launch ([`Gpu::timing_events`]); the time
/// between them is [`elapsed_ms`].
pub type EventPair = (TimingEvent, TimingEvent);

/// Milliseconds between two recorded events (after a synchronize).
pub fn elapsed_ms(pair: &EventPair) -> GpuResult<f64> {
    let (start, end) = pair;
    start
        .0
        .elapsed_ms(&end.0)
        .map(f64::from)
        .map_err(fault("reading event times"))
}

/// Destroys whatever is left of the device's primary context after a sticky fault, so the
/// next [`Gpu::open`] starts from a clean one. Call only after every [`Gpu`] was dropped.
pub fn reset_device(ordinal: usize) {
    let mut dev = 0;
    unsafe {
        if sys::cuDeviceGet(&mut dev, ordinal as i32) == CUresult::CUDA_SUCCESS {
            let _ = sys::cuDevicePrimaryCtxReset_v2(dev);
        }
    }
}

/// True when a CUDA driver is loadable and reports at least one device (for tests that skip).
pub fn gpu_available() -> bool {
    let present = unsafe { sys::is_culib_present() };
    present && CudaContext::device_count().map(|n| n > 0).unwrap_or(false)
}

/// Loads the cuBLAS library (not a handle) and keeps it loaded, if it is present: run on a
/// thread of its own while the first job is prepared, so that reading the library from disk
/// overlaps that work instead of waiting for the first cuBLAS baseline. A no-op where cuBLAS
/// is absent ([`Gpu::blas`] reports that when a baseline asks; cudarc panics when it loads a
/// library that is absent, hence the look first).
pub fn preload_blas() {
    if unsafe { cudarc::cublas::sys::is_culib_present() } {
        let _ = unsafe { cudarc::cublas::sys::culib() };
    }
}

/// A cuBLAS handle on the GPU's stream, in pure FP32 mode (no TF32).
pub struct Blas(cudarc::cublas::CudaBlas);

impl Gpu {
    /// Opens cuBLAS; `Err` says why it is not available (the caller goes on without it).
    pub fn blas(&self) -> std::result::Result<Blas, String> {
        // cudarc panics when the library is absent, so look for it first.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err("cuBLAS (libcublas.so) could not be loaded".into());
        }
        let blas = cudarc::cublas::CudaBlas::new(self.stream.clone())
            .map_err(|e| format!("cublasCreate: {e:?}"))?;
        // The default math mode is already FP32; set it explicitly so TF32 never sneaks in.
        unsafe {
            cudarc::cublas::sys::cublasSetMathMode(
                *blas.handle(),
                cudarc::cublas::sys::cublasMath_t::CUBLAS_DEFAULT_MATH,
            )
        }
        .result()
        .map_err(|e| format!("cublasSetMathMode: {e:?}"))?;
        Ok(Blas(blas))
    }

    /// Row-major C (m x n) = A (m x k) · B (k x n) with cublasSgemm, computed as the
    /// column-major product Cᵀ = Bᵀ·Aᵀ so no transposes are needed.
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm(
        &self,
        blas: &Blas,
        a: u64,
        b: u64,
        c: u64,
        m: i32,
        n: i32,
        k: i32,
    ) -> GpuResult<()> {
        use cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
        let (alpha, beta) = (1.0f32, 0.0f32);
        unsafe {
            cudarc::cublas::result::sgemm(
                *blas.0.handle(),
                CUBLAS_OP_N,
                CUBLAS_OP_N,
                n,
                m,
                k,
                &alpha,
                b as *const f32,
                n,
                a as *const f32,
                k,
                &beta,
                c as *mut f32,
                n,
            )
        }
        .map_err(|e| GpuFault {
            during: format!("cublasSgemm ({e:?})"),
            code: CUresult::CUDA_ERROR_UNKNOWN,
            sticky: false,
        })
    }
}

/// How many CUDA devices the driver reports; an error says why there are none to count.
pub fn device_count() -> Result<usize> {
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoGpu(
            "the NVIDIA driver (libcuda.so) could not be loaded".into(),
        ));
    }
    let count = CudaContext::device_count()
        .map_err(|e| Error::NoGpu(format!("cuInit failed with {:?}", e.0)))?;
    if count <= 0 {
        return Err(Error::NoGpu("the driver reports no CUDA device".into()));
    }
    Ok(count as usize)
}

/// The indices of `--gpus LIST` (`None` for `all`): whole numbers, each once.
pub fn parse_gpu_spec(spec: &str) -> Result<Option<Vec<usize>>> {
    if spec.trim() == "all" {
        return Ok(None);
    }
    let mut out = Vec::new();
    for part in spec.split(',') {
        let i: usize = part.trim().parse().map_err(|_| {
            Error::Usage(format!(
                "--gpus: '{part}' is not a device index (use all or 0,1,...)"
            ))
        })?;
        if out.contains(&i) {
            return Err(Error::Usage(format!("--gpus: device {i} is listed twice")));
        }
        out.push(i);
    }
    Ok(Some(out))
}

/// Checks parsed `--gpus` indices against the `count` devices present.
pub fn gpus_present(listed: Option<Vec<usize>>, count: usize) -> Result<Vec<usize>> {
    let Some(list) = listed else {
        return Ok((0..count).collect());
    };
    if let Some(i) = list.iter().find(|&&i| i >= count) {
        return Err(Error::Usage(format!(
            "--gpus: device {i} does not exist (this machine has {count}: 0..{})",
            count.saturating_sub(1)
        )));
    }
    Ok(list)
}

#[cfg(test)]
mod gpu_list_tests {
    use super::*;

    #[test]
    fn gpu_lists_are_checked_before_and_against_the_devices() {
        assert_eq!(parse_gpu_spec("all").unwrap(), None);
        assert_eq!(parse_gpu_spec(" 1, 0").unwrap(), Some(vec![1, 0]));
        for (bad, why) in [
            ("0,0", "device 0 is listed twice"),
            ("0,a", "'a' is not a device index"),
            ("", "'' is not a device index"),
            ("0,", "'' is not a device index"),
            ("-1", "'-1' is not a device index"),
        ] {
            let e = parse_gpu_spec(bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        assert_eq!(gpus_present(None, 2).unwrap(), vec![0, 1]);
        assert_eq!(gpus_present(Some(vec![1]), 2).unwrap(), vec![1]);
        let e = gpus_present(Some(vec![0, 2]), 2).unwrap_err().to_string();
        assert!(
            e.contains("device 2 does not exist") && e.contains("0..1"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    /// An unsupported request names what was asked, keeps the context usable and becomes the
    /// same CUDA error as a driver failure.
    #[test]
    fn an_unsupported_request_is_a_fault_that_leaves_the_context_usable() {
        let f = GpuFault::unsupported("comparing elements of 3 bytes");
        assert!(!f.sticky);
        assert_eq!(
            f.to_string(),
            "comparing elements of 3 bytes failed with CUDA_ERROR_NOT_SUPPORTED"
        );
        match Error::from(f) {
            Error::Cuda { during, why } => {
                assert_eq!(during, "comparing elements of 3 bytes");
                assert_eq!(why, "CUDA_ERROR_NOT_SUPPORTED");
            }
            other => panic!("{other:?}"),
        }
    }
}
