//! What a device allows and what one launch asks of it.

/// Limits of the device the space is built for (from the GPU, or defaults for --compile-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceLimits {
    pub max_threads_per_block: i64,
    /// Static shared memory a block may use, in bytes.
    pub max_shared_per_block: i64,
    pub num_sms: i64,
    /// Shared memory a block may use when its kernel opts in (dynamic shared memory, with
    /// the function's maximum raised before launch), in bytes: 227 KB on an H100 against 48 KB
    /// static. Records written before it existed read as the static limit.
    #[serde(default = "static_shared_limit")]
    pub max_shared_optin: i64,
}

fn static_shared_limit() -> i64 {
    48 * 1024
}

impl DeviceLimits {
    /// An H100's limits: used when compiling without a GPU (`--compile-only`).
    pub const SM90_DEFAULT: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_shared_per_block: 48 * 1024,
        num_sms: 132,
        max_shared_optin: 227 * 1024,
    };
}

/// Grid and block dimensions of one launch, and the dynamic shared memory it asks for. Tasks
/// carry it as it is to the worker processes (serialized), which launch with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    /// Bytes of dynamic shared memory per block (`extern __shared__`), 0 for kernels that use
    /// static shared memory only. Past the static limit (48 KB) the launcher must first raise
    /// the kernel's `MAX_DYNAMIC_SHARED_SIZE_BYTES` ([`crate::cuda::gpu::Gpu::launch`] does).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}
