//! The CUDA driver (contexts, buffers, launches, events) and NVRTC (CUDA source → cubin).

pub mod compile;
pub mod gpu;
