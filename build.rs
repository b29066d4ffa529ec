//! Embeds the built-in ops: every file of `templates/` (specs and templates) becomes an entry
//! `(file name, text)` of `$OUT_DIR/builtin_files.rs`, which `src/spec/ops.rs` includes, so a
//! new op's files are picked up without naming them in Rust code.
//!
//! Stamps the build's identity into the binary as `CUDA_AUTOTUNE_BUILD` ([`build_identity`]),
//! which shard manifests record so that `tune merge` refuses shards of different builds.

use std::path::{Path, PathBuf};

/// What the binary is built from, relative to the crate's folder: files, and folders taken
/// whole.
const SOURCES: &[&str] = &["Cargo.toml", "Cargo.lock", "build.rs", "src", "templates"];

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest);
    // A folder is watched whole; a path that is not there would run this script every build.
    for s in SOURCES.iter().filter(|s| root.join(s).exists()) {
        println!("cargo:rerun-if-changed={s}");
    }
    let dir = root.join("templates");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("templates/ is readable")
        .map(|e| e.expect("templates/ is readable"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            e.file_name()
                .into_string()
                .expect("file names in templates/ are UTF-8")
        })
        .collect();
    files.sort();
    let mut table = String::from("&[\n");
    for f in &files {
        let path = dir.join(f);
        let path = path.to_str().expect("the path of templates/ is UTF-8");
        table.push_str(&format!("    ({f:?}, include_str!({path:?})),\n"));
    }
    table.push_str("]\n");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("builtin_files.rs"), table).expect("OUT_DIR is writable");
    println!(
        "cargo:rustc-env=CUDA_AUTOTUNE_BUILD={}",
        build_identity(root)
    );
}

/// `src.` and 16 hex digits: a hash (128-bit FNV-1a, its first half) of every file of
/// [`SOURCES`] under `root`, each by its path relative to `root` and its bytes, in path order.
/// Hidden files (editors' swap and lock files) are left out, and so is a file that is not
/// there (a packaged crate has no Cargo.lock). The files rather than a git commit: the same
/// sources give the same identity from a checkout, from a tarball or a container's build
/// context without git, and a checkout with uncommitted edits gives another one.
fn build_identity(root: &Path) -> String {
    let mut files = Vec::new();
    for s in SOURCES {
        collect(&root.join(s), &mut files);
    }
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root).expect("under the crate's folder");
            let name = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            (name, p)
        })
        .collect();
    named.sort();
    let mut hash = Fnv128::new();
    for (name, path) in &named {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
        for part in [name.as_bytes(), &bytes] {
            hash.write(&(part.len() as u64).to_le_bytes());
            hash.write(part);
        }
    }
    format!("src.{:016x}", (hash.0 >> 64) as u64)
}

/// The files at `path` (itself, or those under it), hidden ones left out.
fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    let hidden = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if hidden {
        return;
    }
    if meta.is_file() {
        out.push(path.to_path_buf());
    } else if meta.is_dir() {
        let entries = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
        for e in entries {
            let e = e.unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
            collect(&e.path(), out);
        }
    }
}

/// 128-bit FNV-1a: stable across Rust releases and platforms, with no dependency.
struct Fnv128(u128);

impl Fnv128 {
    fn new() -> Self {
        Fnv128(0x6c62272e07bb014262b821756295c58d)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u128;
            self.0 = self.0.wrapping_mul(0x0000000001000000000000000000013b);
        }
    }
}
