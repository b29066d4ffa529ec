//! Tuning on several GPUs or machines: sweeps over shapes (spread over GPUs through one
//! queue), shards of a sweep with their manifests, and merging the shards' outputs.

pub mod merge;
pub mod shard;
pub mod sweep;
