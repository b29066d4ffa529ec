//! NVRTC: CUDA source to a cubin for one architecture, with an on-disk cache.
//!
//! We compile straight to a cubin for the device's own architecture (`sm_XY`) rather than
//! PTX: PTX from an NVRTC newer than the driver fails to load, and a cubin skips the driver's
//! JIT. Cache entries are keyed by a hash of source, options, NVRTC version and architecture,
//! and carry a checksum of their payload, so a damaged entry is detected and rebuilt.

use crate::error::{Error, Result};
use cudarc::nvrtc::{result as nvrtc, sys};
use sha2::{Digest, Sha256};
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A compiled kernel image.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// Wall time of the NVRTC call, or of the cache read.
    pub millis: f64,
    pub from_cache: bool,
    /// Compiler warnings, if any.
    pub log: String,
}

/// A failed compile: the compiler log, kept for the variant's record.
#[derive(Debug, Clone)]
pub struct CompileFailure {
    pub log: String,
    pub millis: f64,
}

/// NVRTC for one target architecture.
#[derive(Debug, Clone)]
pub struct Compiler {
    arch: String,
    options: Vec<String>,
    version: (i32, i32),
    cache_dir: Option<PathBuf>,
}

/// Checks that `arch` looks like `sm_90` / `sm_90a` / `sm_120`.
pub fn check_arch(arch: &str) -> Result<()> {
    let digits = arch.strip_prefix("sm_").map(|s| s.trim_end_matches('a'));
    match digits {
        Some(d) if !d.is_empty() && d.len() <= 3 && d.chars().all(|c| c.is_ascii_digit()) => Ok(()),
        _ => Err(Error::Usage(format!(
            "invalid --arch '{arch}': expected sm_XY such as sm_90"
        ))),
    }
}

/// Where compiled cubins are kept between runs: `$CUDA_AUTOTUNE_CACHE`, else
/// `$XDG_CACHE_HOME/cuda-autotune`, else `~/.cache/cuda-autotune`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CUDA_AUTOTUNE_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("cuda-autotune"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("cuda-autotune"))
}

/// NVRTC's version, or a clear error saying what to install when the library is missing.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    // cudarc panics when the library is absent, so look for it first.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoNvrtc(
            "libnvrtc.so could not be loaded; install the CUDA toolkit or `pip install nvidia-cuda-nvrtc` \
             and put its lib folder on LD_LIBRARY_PATH (scripts/nvrtc-env.sh does this)"
                .into(),
        ));
    }
    let (mut major, mut minor) = (0, 0);
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::NoNvrtc(format!("nvrtcVersion failed: {e}")))?;
    Ok((major, minor))
}

const CACHE_MAGIC: &[u8; 8] = b"CATCUBN1";

impl Compiler {
    pub fn new(arch: &str, cache_dir: Option<PathBuf>) -> Result<Compiler> {
        check_arch(arch)?;
        let version = nvrtc_version()?;
        let options = vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".to_string(),
            "--device-int128".to_string(),
        ];
        Ok(Compiler {
            arch: arch.to_string(),
            options,
            version,
            cache_dir,
        })
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The cache key: everything that changes the compiled image.
    pub fn key(&self, source: &str) -> String {
        let mut h = Sha256::new();
        h.update(source.as_bytes());
        for o in &self.options {
            h.update([0u8]);
            h.update(o.as_bytes());
        }
        h.update(format!(
            "\0nvrtc {}.{}\0{}",
            self.version.0, self.version.1, self.arch
        ));
        format!("{:x}", h.finalize())
    }

    /// Compiles `source`, using the cache when one is set.
    pub fn compile(&self, source: &str) -> std::result::Result<Compiled, CompileFailure> {
        let start = Instant::now();
        let key = self.key(source);
        if let Some(cubin) = self.cache_dir.as_deref().and_then(|d| read_cache(d, &key)) {
            return Ok(Compiled {
                cubin,
                millis: start.elapsed().as_secs_f64() * 1e3,
                from_cache: true,
                log: String::new(),
            });
        }
        let result = self.compile_uncached(source);
        let millis = start.elapsed().as_secs_f64() * 1e3;
        match result {
            Ok((cubin, log)) => {
                if let Some(dir) = &self.cache_dir {
                    // A cache that cannot be written only costs time on the next run.
                    let _ = write_cache(dir, &key, &cubin);
                }
                Ok(Compiled {
                    cubin,
                    millis,
                    from_cache: false,
                    log,
                })
            }
            Err(log) => Err(CompileFailure { log, millis }),
        }
    }

    fn compile_uncached(&self, source: &str) -> std::result::Result<(Vec<u8>, String), String> {
        let src = CString::new(source).map_err(|_| "source contains a NUL byte".to_string())?;
        let prog = nvrtc::create_program(&src, Some(c"variant.cu"))
            .map_err(|e| format!("nvrtcCreateProgram: {e}"))?;
        let compiled = unsafe { nvrtc::compile_program(prog, &self.options) };
        let log = unsafe { nvrtc::get_program_log(prog) }
            .map(|raw| c_chars_to_string(&raw))
            .unwrap_or_default();
        let out = match compiled {
            Err(e) => Err(if log.trim().is_empty() {
                format!("{e}")
            } else {
                log.trim().to_string()
            }),
            Ok(()) => unsafe { get_cubin(prog) }
                .map(|cubin| (cubin, log.trim().to_string()))
                .map_err(|e| format!("nvrtcGetCUBIN: {e}")),
        };
        let _ = unsafe { nvrtc::destroy_program(prog) };
        out
    }
}

unsafe fn get_cubin(prog: sys::nvrtcProgram) -> std::result::Result<Vec<u8>, nvrtc::NvrtcError> {
    let mut size = 0usize;
    sys::nvrtcGetCUBINSize(prog, &mut size).result()?;
    let mut buf = vec![0u8; size];
    sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char).result()?;
    Ok(buf)
}

fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn cache_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("cubin").join(format!("{key}.bin"))
}

/// Reads a cache entry; `None` when absent or damaged (wrong magic or checksum).
pub fn read_cache(dir: &Path, key: &str) -> Option<Vec<u8>> {
    let data = std::fs::read(cache_path(dir, key)).ok()?;
    if data.len() < 40 || &data[..8] != CACHE_MAGIC {
        return None;
    }
    let payload = &data[40..];
    let sum = Sha256::digest(payload);
    (sum.as_slice() == &data[8..40]).then(|| payload.to_vec())
}

/// Writes a cache entry atomically (temp file + rename), so a reader never sees half of one.
pub fn write_cache(dir: &Path, key: &str, cubin: &[u8]) -> std::io::Result<()> {
    let path = cache_path(dir, key);
    let parent = path.parent().expect("cache path has a parent");
    std::fs::create_dir_all(parent)?;
    let mut data = Vec::with_capacity(cubin.len() + 40);
    data.extend_from_slice(CACHE_MAGIC);
    data.extend_from_slice(&Sha256::digest(cubin));
    data.extend_from_slice(cubin);
    let tmp = parent.join(format!(".{key}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, &data)?;
    std::fs::rename(&tmp, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_are_checked() {
        assert!(check_arch("sm_90").is_ok());
        assert!(check_arch("sm_90a").is_ok());
        assert!(check_arch("sm_120").is_ok());
        for bad in ["90", "sm_", "compute_90", "sm_9x", "sm_1234"] {
            assert!(check_arch(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cache_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        write_cache(dir.path(), "k", b"cubin bytes").unwrap();
        assert_eq!(read_cache(dir.path(), "k").unwrap(), b"cubin bytes");
        let path = cache_path(dir.path(), "k");
        let mut data = std::fs::read(&path).unwrap();
        let last = data.len() - 1;
        data[last] ^= 0xff;
        std::fs::write(&path, &data).unwrap();
        assert!(
            read_cache(dir.path(), "k").is_none(),
            "damaged entry must be rejected"
        );
        std::fs::write(&path, b"short").unwrap();
        assert!(read_cache(dir.path(), "k").is_none());
        assert!(read_cache(dir.path(), "absent").is_none());
    }
}
