//! Plain data shared by every layer: shapes, element types, device
//! limits and launch dimensions, shard slices, task ids, the work a GPU task runs, and the
//! domains of numeric settings.
//! No I/O, no GPU.

pub mod domain;
pub mod dtype;
pub mod limits;
pub mod shape;
pub mod slice;
pub mod task;
pub mod work;
