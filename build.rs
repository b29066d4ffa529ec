//! Embeds the built-in ops: every file of `templates/` (specs and templates) becomes an entry
//! `(file name, text)` of `$OUT_DIR/builtin_files.rs`, which `src/spec/ops.rs` includes, so a
//! new op's files are picked up without naming them in Rust code.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=templates");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("templates");
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
}
