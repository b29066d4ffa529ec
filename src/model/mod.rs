//! Plain data shared by every layer: shapes, element types, shard slices. No I/O, no GPU.

pub mod dtype;
pub mod shape;
pub mod slice;
