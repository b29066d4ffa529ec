//! What one GPU task runs, as plain data: a kernel of a compiled image, a device-to-device
//! copy, or a cuBLAS SGEMM, on the job's buffers by name. The tuner builds it (variants, and
//! each baseline kind in `crate::spec::baseline`), the worker's session runs it; it travels
//! between them as JSON.

use crate::model::limits::LaunchDims;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What one task runs. A new kind of GPU work is a variant here and its arm in the worker's
/// session (`isolate/session.rs`), which runs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Work {
    Kernel {
        cubin: PathBuf,
        kernel: String,
        /// Grid, block and dynamic shared memory (the spec's `[launch]`).
        launch: LaunchDims,
        /// Kernels of the same cubin launched first, in the same timed region (the spec's
        /// prologue for this configuration).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        before: Vec<PreLaunch>,
    },
    Memcpy {
        from: String,
        to: String,
    },
    /// cuBLAS SGEMM on row-major buffers: C (m x n) = A (m x k) · B (k x n).
    Sgemm {
        a: String,
        b: String,
        c: String,
        m: i32,
        n: i32,
        k: i32,
    },
}

/// A prologue kernel of a task: launched with the op's arguments before the task's kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreLaunch {
    pub kernel: String,
    pub launch: LaunchDims,
}
