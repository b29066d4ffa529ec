//! NVRTC: CUDA source to a cubin for one architecture, with an on-disk cache.
//!
//! We compile straight to a cubin for the device's own architecture (`sm_XY`) rather than
//! PTX: PTX from an NVRTC newer than the driver fails to load, and a cubin skips the driver's
//! JIT. Cache entries are keyed by a hash of source, options, NVRTC version and architecture,
//! and carry a checksum of their payload, so a damaged entry is detected and rebuilt.

use crate::error::{Error, Result};
use crate::model::limits::arch_compute_capability;
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

/// The environment worker processes run NVRTC with: its own cache off. With a driver present,
/// NVRTC also keeps what it compiles in the CUDA compute cache (`~/.nv/ComputeCache`, shared
/// with every CUDA program's JIT). This tool keeps one cache, its own cubins keyed by source,
/// options, NVRTC version and architecture, so NVRTC's stays off: an empty cache and
/// `--no-cache` then compile for real, compile times (and the automatic compile time limit
/// built on them) do not depend on what an earlier run left behind, and a sweep of thousands
/// of kernels does not evict other programs' entries. The same switch turns off the driver's
/// JIT cache in these processes; the tool loads cubins built for the device, so nothing of its
/// own is JIT-compiled (a library's PTX would be, on a GPU newer than the library).
pub const NVRTC_ENV: [(&str, &str); 1] = [("CUDA_CACHE_DISABLE", "1")];

/// Checks that `arch` looks like `sm_90` / `sm_90a` / `sm_120`.
pub fn check_arch(arch: &str) -> Result<()> {
    match arch_compute_capability(arch) {
        Some(_) => Ok(()),
        None => Err(Error::Usage(format!(
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

/// NVRTC's version and the architectures it compiles for (`[75, 80, ...]`), or `None` when the
/// library cannot be loaded (compiling then fails with its own error, [`Error::NoNvrtc`]).
/// Asked once, so an unsupported architecture is one error instead of one per variant.
fn nvrtc_archs() -> Option<((i32, i32), Vec<i32>)> {
    let version = nvrtc_version().ok()?;
    let mut n: std::ffi::c_int = 0;
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .ok()?;
    let mut archs: Vec<std::ffi::c_int> = vec![0; usize::try_from(n).ok()?];
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .ok()?;
    Some((version, archs))
}

/// `sm_90a` → 90 (0 for a name that is not an architecture).
fn arch_number(arch: &str) -> i32 {
    arch_compute_capability(arch)
        .and_then(|cc| i32::try_from(cc).ok())
        .unwrap_or(0)
}

/// `sm_75, sm_80, ...`.
fn arch_list(archs: &[i32]) -> String {
    archs
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// When NVRTC cannot compile for `arch`: its version and the architectures it can, as
/// `sm_75, sm_80, ...`. `None` when it can, or when NVRTC cannot be loaded (compiling then
/// fails with its own error).
pub fn unsupported_arch(arch: &str) -> Option<((i32, i32), String)> {
    let (version, supported) = nvrtc_archs()?;
    (!supported.contains(&arch_number(arch))).then(|| (version, arch_list(&supported)))
}

/// The NVRTC options every source is compiled with for `arch`.
fn nvrtc_options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "--device-int128".to_string(),
    ]
}

/// The key of `source` compiled for `arch` by NVRTC `version`: a hash of everything that
/// changes the compiled image (source, options, NVRTC version, architecture). It is the cubin
/// cache's file name and best.csv's `source_hash`, so a stored row can be checked against
/// what its template renders today without loading NVRTC.
pub fn source_key(source: &str, arch: &str, version: (i32, i32)) -> String {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    for o in nvrtc_options(arch) {
        h.update([0u8]);
        h.update(o.as_bytes());
    }
    h.update(format!("\0nvrtc {}.{}\0{}", version.0, version.1, arch));
    format!("{:x}", h.finalize())
}

const CACHE_MAGIC: &[u8; 8] = b"CATCUBN1";

impl Compiler {
    pub fn new(arch: &str, cache_dir: Option<PathBuf>) -> Result<Compiler> {
        check_arch(arch)?;
        let version = nvrtc_version()?;
        Ok(Compiler {
            arch: arch.to_string(),
            options: nvrtc_options(arch),
            version,
            cache_dir,
        })
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The cubin cache it reads and writes, `None` without one.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The cache key: everything that changes the compiled image ([`source_key`]).
    pub fn key(&self, source: &str) -> String {
        source_key(source, &self.arch, self.version)
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

    /// Compiles a one-line kernel with the real options and drops the result, without the
    /// cache (nothing is read or written): the first compile in a process pays NVRTC's
    /// one-off costs (its code and built-in headers paged in, its initialisation), so a
    /// compile worker does this as it starts, while the run still prepares, instead of in
    /// its first real compile. Whether it compiled does not matter: a real compile reports
    /// its own errors.
    pub fn warm_up(&self) {
        const WARM_UP_SOURCE: &str =
            "extern \"C\" __global__ void warm(float* x) { x[threadIdx.x] += 1.0f; }";
        let _ = self.compile_uncached(WARM_UP_SOURCE);
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

/// The kernels a cubin defines: its function symbols marked as CUDA entry points, the names
/// `cuModuleGetFunction` finds. A cubin is a 64-bit little-endian ELF file; device functions
/// that were not inlined are function symbols too, but without the entry mark.
pub fn kernel_names(cubin: &[u8]) -> std::result::Result<Vec<String>, String> {
    const STT_FUNC: u8 = 2;
    const SHT_SYMTAB: u32 = 2;
    // `st_other` bit of an entry function (a `__global__` kernel) in NVIDIA's ELF files.
    const STO_CUDA_ENTRY: u8 = 0x10;
    let bad = || "the compiled image is not a 64-bit ELF file".to_string();
    let bytes = |at: usize, n: usize| cubin.get(at..at.checked_add(n)?);
    let u16_at = |at| bytes(at, 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |at| bytes(at, 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let u64_at = |at| {
        bytes(at, 8)
            .and_then(|b| usize::try_from(u64::from_le_bytes(b.try_into().expect("8 bytes"))).ok())
    };
    if bytes(0, 6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(bad());
    }
    let (shoff, shentsize, shnum) = (
        u64_at(0x28).ok_or_else(bad)?,
        u16_at(0x3a).ok_or_else(bad)?,
        u16_at(0x3c).ok_or_else(bad)?,
    );
    // A section header: type at 4, offset at 24, size at 32, link at 40, entry size at 56.
    let section = |i: usize| -> Option<(u32, usize, usize, usize, usize)> {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(at + 4)?,
            u64_at(at + 24)?,
            u64_at(at + 32)?,
            u32_at(at + 40)? as usize,
            u64_at(at + 56)?,
        ))
    };
    let mut names = Vec::new();
    for i in 0..shnum {
        let (kind, offset, size, link, entsize) = section(i).ok_or_else(bad)?;
        if kind != SHT_SYMTAB || entsize < 24 {
            continue;
        }
        let (_, strings, strings_size, _, _) = section(link).ok_or_else(bad)?;
        let strings = bytes(strings, strings_size).ok_or_else(bad)?;
        // A symbol: name offset at 0, info at 4, other at 5, section index at 6.
        for at in (offset..offset + size).step_by(entsize) {
            let sym = bytes(at, 24).ok_or_else(bad)?;
            let defined = u16::from_le_bytes([sym[6], sym[7]]) != 0;
            if sym[4] & 0xf != STT_FUNC || sym[5] & STO_CUDA_ENTRY == 0 || !defined {
                continue;
            }
            let name_at = u32::from_le_bytes(sym[..4].try_into().expect("4 bytes")) as usize;
            let name = strings.get(name_at..).ok_or_else(bad)?;
            let end = name.iter().position(|&b| b == 0).ok_or_else(bad)?;
            names.push(String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }
    Ok(names)
}

/// Checks that an image whose kernels are `defined` ([`kernel_names`]) defines each of
/// `kernels` (the names a launch looks up): the error names the first one missing and the
/// kernels the image does define.
pub fn check_kernels(defined: &[String], kernels: &[String]) -> std::result::Result<(), String> {
    match kernels.iter().find(|k| !defined.contains(k)) {
        None => Ok(()),
        Some(missing) => Err(format!(
            "no kernel '{missing}' in the compiled image (it defines {}; a spec's kernel names \
             an extern \"C\" __global__ function of its template)",
            if defined.is_empty() {
                "none".to_string()
            } else {
                defined.join(", ")
            }
        )),
    }
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

    /// A 64-bit ELF file as NVRTC lays out a cubin's symbols: a string table, and a symbol
    /// table of `(name, info, other, section)`.
    fn elf(symbols: &[(&str, u8, u8, u16)]) -> Vec<u8> {
        let mut strings = vec![0u8];
        let mut table = vec![0u8; 24]; // the null symbol
        for (name, info, other, section) in symbols {
            table.extend((strings.len() as u32).to_le_bytes());
            table.extend([*info, *other]);
            table.extend(section.to_le_bytes());
            table.extend([0u8; 16]);
            strings.extend(name.bytes().chain([0]));
        }
        let (strings_at, table_at) = (64usize, 64 + strings.len());
        let headers_at = table_at + table.len();
        let mut out = vec![0u8; 64];
        out[..6].copy_from_slice(b"\x7fELF\x02\x01");
        out[0x28..0x30].copy_from_slice(&(headers_at as u64).to_le_bytes());
        out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        out[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        out.extend(&strings);
        out.extend(&table);
        let header = |kind: u32, at: usize, size: usize, link: u32, entsize: u64| {
            let mut h = vec![0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&(at as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[56..64].copy_from_slice(&entsize.to_le_bytes());
            h
        };
        out.extend(vec![0u8; 64]);
        out.extend(header(3, strings_at, strings.len(), 0, 0));
        out.extend(header(2, table_at, table.len(), 1, 24));
        out
    }

    /// The kernels of an image are its defined function symbols marked as entries: not a
    /// device function, not an object, not an undefined entry. Anything that is not such a
    /// file, or is cut short, is an error, never a panic.
    #[test]
    fn kernel_names_are_the_defined_entry_functions() {
        const GLOBAL_FUNC: u8 = 0x12;
        let image = elf(&[
            ("scale", GLOBAL_FUNC, 0x10, 1),
            ("twice", 0x02, 0x00, 1),
            ("table", 0x11, 0x10, 1),
            ("gone", GLOBAL_FUNC, 0x10, 0),
            ("_Z4sortPf", GLOBAL_FUNC, 0x10, 2),
        ]);
        let names = kernel_names(&image).unwrap();
        assert_eq!(names, ["scale", "_Z4sortPf"]);
        assert_eq!(check_kernels(&names, &["scale".into()]), Ok(()));
        let why = check_kernels(&names, &["scale".into(), "twice".into()]).unwrap_err();
        assert!(
            why.starts_with(
                "no kernel 'twice' in the compiled image (it defines scale, _Z4sortPf;"
            ),
            "{why}"
        );
        assert!(check_kernels(&[], &["k".into()])
            .unwrap_err()
            .contains("it defines none"));
        for cut in [0, 5, 40, 64, image.len() - 1] {
            assert!(kernel_names(&image[..cut]).is_err(), "cut at {cut}");
        }
        assert!(kernel_names(b"PTX text, not an ELF file").is_err());
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
