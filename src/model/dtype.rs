//! Element types of an op's data (`--dtype`). The host side never does arithmetic on them
//! (except the float32-only CPU matmul reference): inputs are made as raw little-endian bytes,
//! buffers are sized in bytes and the GPU compares raw bits, so one data path serves every
//! element size. Templates see the element's C type `T` and its size `ELEM_BYTES`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An element type an op may be tuned for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE binary16, moved as 16-bit patterns.
    F16,
    /// bfloat16 (the upper half of a binary32), moved as 16-bit patterns.
    Bf16,
    /// IEEE binary32: the type every op was written for first, hence the default.
    #[default]
    F32,
    /// IEEE binary64.
    F64,
}

/// Every element type, in the order messages list them.
pub const ALL: [Dtype; 4] = [Dtype::F32, Dtype::F64, Dtype::F16, Dtype::Bf16];

/// The element type a run's name (its CSV file, its `tune check` line) carries: none for
/// float32, the type every run had before `--dtype` (an empty name too), so those names never
/// change; the name itself for any other type. It depends on the name alone, not on an op's
/// default, so readers of a results folder need no spec.
pub fn named(dtype: &str) -> Option<&str> {
    (!matches!(dtype, "" | "f32")).then_some(dtype)
}

impl Dtype {
    /// `f32` → `Dtype::F32`; `None` for a name that is not an element type.
    pub fn parse(name: &str) -> Option<Dtype> {
        ALL.into_iter().find(|d| d.name() == name.trim())
    }

    /// The name used on the command line, in specs, CSV columns and file names.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }

    /// Size of one element in bytes (`ELEM_BYTES` in expressions and templates).
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }

    /// The C type templates name `T`. For f16 and bf16 this is not CUDA's `__half` or
    /// `__nv_bfloat16`: `cuda_fp16.h` is
    /// not shipped with the NVRTC wheel the CPU-only machines compile with (and NVRTC 13 has
    /// no built-in copy), so a 16-bit storage type declared by [`Dtype::c_decl`] stands in.
    /// Data-movement kernels only need the bits.
    pub fn c_type(self) -> &'static str {
        match self {
            Dtype::F16 => "ca_half",
            Dtype::Bf16 => "ca_bfloat16",
            Dtype::F32 => "float",
            Dtype::F64 => "double",
        }
    }

    /// C code that declares [`Dtype::c_type`] where it is not built in (templates render it
    /// as `{{ T_DECL }}` before using `T`); empty for float and double.
    pub fn c_decl(self) -> &'static str {
        match self {
            Dtype::F16 => {
                "// f16 as a 16-bit storage type (no cuda_fp16.h needed): the bits of an IEEE half.\n\
                 struct __align__(2) ca_half { unsigned short bits; };"
            }
            Dtype::Bf16 => {
                "// bf16 as a 16-bit storage type (no cuda_bf16.h needed): the bits of a bfloat16.\n\
                 struct __align__(2) ca_bfloat16 { unsigned short bits; };"
            }
            Dtype::F32 | Dtype::F64 => "",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `f32, f64, f16`: a list of element types for messages.
pub fn names(list: &[Dtype]) -> String {
    list.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sizes_and_types() {
        for d in ALL {
            assert_eq!(Dtype::parse(d.name()), Some(d));
            assert_eq!(d.to_string(), d.name());
        }
        assert_eq!(Dtype::parse("bf16"), Some(Dtype::Bf16));
        assert_eq!(Dtype::parse("f8"), None);
        assert_eq!(Dtype::parse("F32"), None, "names are lower case");
        assert_eq!(
            ALL.map(Dtype::bytes),
            [4, 8, 2, 2],
            "element sizes in bytes"
        );
        assert_eq!(Dtype::default(), Dtype::F32);
        assert!(Dtype::F16.c_decl().contains("ca_half"));
        assert!(Dtype::Bf16.c_decl().contains("ca_bfloat16"));
        assert!(Dtype::F32.c_decl().is_empty() && Dtype::F64.c_decl().is_empty());
        assert_eq!(names(&[Dtype::F32, Dtype::F16]), "f32, f16");
    }
}
