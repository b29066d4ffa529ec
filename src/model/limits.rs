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
    /// The compute capability the sources are compiled for, as `major * 10 + minor` (90 for
    /// sm_90): what the code may use (cp.async from 80, thread block clusters from 90). Specs
    /// see it as `COMPUTE_CAPABILITY`. Records written before it existed were of sm_90.
    #[serde(default = "sm90")]
    pub compute_capability: i64,
}

fn static_shared_limit() -> i64 {
    48 * 1024
}

fn sm90() -> i64 {
    90
}

impl DeviceLimits {
    /// An H100's limits: used when compiling without a GPU (`--compile-only`) for sm_90.
    pub const SM90_DEFAULT: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_shared_per_block: 48 * 1024,
        num_sms: 132,
        max_shared_optin: 227 * 1024,
        compute_capability: 90,
    };

    /// The limits a `--compile-only` run for `arch` (`sm_80`, `sm_90a`, ...) judges validity
    /// by: the compute capability of the target and the shared memory a block of it may opt
    /// into (the CUDA programming guide's table per compute capability); threads and static
    /// shared memory are the same on every target from sm_70, and grids are sized for an
    /// H100's 132 SMs. `None` for a name that is not `sm_` and a number.
    pub fn for_arch(arch: &str) -> Option<DeviceLimits> {
        let cc = arch_compute_capability(arch)?;
        let optin_kb = match cc {
            70 | 72 => 96,
            75 => 64,
            80 | 87 => 163,
            86 | 89 => 99,
            90..=119 => 227,
            120.. => 99,
            // Targets not named here: the static limit, which every one of them allows.
            _ => 48,
        };
        Some(DeviceLimits {
            max_shared_optin: optin_kb * 1024,
            compute_capability: cc,
            ..DeviceLimits::SM90_DEFAULT
        })
    }
}

/// `sm_90` → 90, `sm_90a` → 90, `sm_100f` → 100: the compute capability an architecture name
/// targets, as `major * 10 + minor`. `None` for anything else.
pub fn arch_compute_capability(arch: &str) -> Option<i64> {
    let digits = arch.strip_prefix("sm_")?.trim_end_matches(['a', 'f']);
    (!digits.is_empty() && digits.len() <= 3 && digits.chars().all(|c| c.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Grid and block dimensions of one launch, and the dynamic shared memory it asks for. Tasks
/// carry it as it is to the worker processes (serialized), which launch with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_architecture_names_its_compute_capability_and_shared_memory() {
        assert_eq!(arch_compute_capability("sm_90"), Some(90));
        assert_eq!(arch_compute_capability("sm_90a"), Some(90));
        assert_eq!(arch_compute_capability("sm_100f"), Some(100));
        for bad in ["", "sm_", "90", "sm_9x", "compute_90", "sm_1000"] {
            assert_eq!(arch_compute_capability(bad), None, "{bad}");
        }
        let kb = |arch: &str| DeviceLimits::for_arch(arch).unwrap().max_shared_optin / 1024;
        assert_eq!(
            DeviceLimits::for_arch("sm_90"),
            Some(DeviceLimits::SM90_DEFAULT)
        );
        assert_eq!(
            [
                kb("sm_70"),
                kb("sm_75"),
                kb("sm_80"),
                kb("sm_86"),
                kb("sm_89"),
                kb("sm_100"),
                kb("sm_120")
            ],
            [96, 64, 163, 99, 99, 227, 99]
        );
        assert_eq!(
            DeviceLimits::for_arch("sm_80").unwrap().compute_capability,
            80
        );
    }
}
