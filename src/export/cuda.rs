//! `tune export --format cuda`: one `.cu` per tuned entry, rendered from the op's template
//! with the entry's parameters, plus `cuda_autotune_tuned.h`, a C/C++ table of the entries
//! with a dispatch function.
//!
//! Every file and kernel has one name scheme: `<kernel>_<dtype>_<shape>_<gpu>` for a tuned
//! entry (say `transpose_f32_1000x1000_nvidia_h100_80gb_hbm3`, in
//! `transpose_f32_1000x1000_nvidia_h100_80gb_hbm3.cu`) and `<kernel>_<dtype>_default` for the
//! safe default of each op and dtype in the export ([`safe_default`]); where two ops share a
//! kernel name (one template under two op names) the later name gets `_2`, `_3`, ... so no two
//! files share a name. The kernel is renamed
//! from the op's kernel name as a C token (comments and strings keep the word), everything
//! else in its file is wrapped in a namespace of its own (`ca_<name>`), with its macros
//! `#undef`-ed at the end. So the files can be compiled one by one and linked into one program
//! (`-rdc` too), or `#include`d together in one translation unit, without two definitions of
//! one name.
//!
//! The folder may hold a user's own files. [`write_folder`] lists what it wrote in
//! [`MANIFEST`]; the next export into the folder removes exactly the listed files it does
//! not write again (the kernels of ops or shapes no longer exported), so a build that globs
//! `*.cu` never picks up a stale kernel, and it never touches a file no export wrote: it
//! refuses to overwrite one.

use super::db::parse_dims;
use super::kernel::{
    applicability_of, default_applicability, params_text, rename_identifier, safe_default,
    specialize, untimed_note, Applicability, TunedKernel,
};
use super::{ExportFormat, ExportOptions, TunedDb, Writes};
use crate::error::{Error, Result};
use crate::spec::ops::Op;
use crate::store::best::{parse_params, BestRow};
use crate::store::files::{slug, write_atomic};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

pub const INFO: ExportFormat = ExportFormat {
    name: "cuda",
    about: "One specialized .cu per tuned entry plus a C/C++ header with a dispatch function",
    writes: Writes::Folder(write),
};

/// Writes the export of `rows` (those of ops with a spec here) into `dir`; says what it wrote.
fn write(db: &TunedDb, rows: Vec<&BestRow>, args: &ExportOptions, dir: &Path) -> Result<String> {
    let rows = with_known_ops(rows, args)?;
    let Rendered {
        files,
        tuned,
        skipped,
        untimed,
    } = render(
        &rows,
        args.templates.as_deref(),
        &db.path().display().to_string(),
    )?;
    for why in skipped.iter().chain(&untimed) {
        eprintln!("warning: {}: {why}", db.path().display());
    }
    let written = write_folder(dir, &files)?;
    // Files written, not rendered: names are unique, and a clash must not count twice.
    let kernels = files
        .iter()
        .filter(|f| f.name.ends_with(".cu"))
        .map(|f| f.name.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let removed = match written.removed.len() {
        0 => String::new(),
        n => format!("; removed {n} file(s) of the previous export"),
    };
    Ok(format!(
        "wrote {kernels} kernel source(s) ({} tuned, {} safe default(s)) and {HEADER} to \
         {}{removed}\n",
        tuned,
        kernels - tuned,
        dir.display()
    ))
}

/// The rows whose op has a spec here (built in, or in `--templates`), for `--format cuda`,
/// which renders every row's kernel. A database also holds rows of ops tuned from a user's own
/// spec (`--spec`) or of test ops; without `--op` those are skipped with a warning naming them,
/// rather than failing the whole export. With `--op`, or when no row is left, it is an error.
fn with_known_ops<'a>(rows: Vec<&'a BestRow>, args: &ExportOptions) -> Result<Vec<&'a BestRow>> {
    if args.op.is_some() {
        return Ok(rows);
    }
    let dir = args.templates.as_deref();
    if let Some(d) = dir.filter(|d| !d.is_dir()) {
        return Err(Error::Usage(format!(
            "--templates {}: no such folder",
            d.display()
        )));
    }
    // Each op's spec is looked up once, in the order the rows name them.
    let mut unknown: Vec<&str> = Vec::new();
    let mut checked: Vec<&str> = Vec::new();
    for row in &rows {
        if checked.contains(&row.op.as_str()) {
            continue;
        }
        checked.push(&row.op);
        match Op::load(&row.op, dir) {
            Ok(_) => {}
            Err(Error::UnknownOp { .. }) => unknown.push(&row.op),
            Err(e) => return Err(e),
        }
    }
    let known: Vec<&BestRow> = rows
        .into_iter()
        .filter(|r| !unknown.contains(&r.op.as_str()))
        .collect();
    if unknown.is_empty() {
        return Ok(known);
    }
    let what = format!(
        "ops without a spec here: {} ({})",
        unknown.join(", "),
        match dir {
            Some(d) => format!("{} holds no spec for them", d.display()),
            None => "pass --templates DIR holding their specs".to_string(),
        }
    );
    if known.is_empty() {
        return Err(Error::Usage(format!(
            "nothing to export: every row is of {what}"
        )));
    }
    eprintln!("warning: skipping the rows of {what}");
    Ok(known)
}

/// The header's file name.
pub const HEADER: &str = "cuda_autotune_tuned.h";

/// The file in an export's folder that lists the files the export wrote, one name a line.
pub const MANIFEST: &str = "cuda_autotune_manifest.txt";

/// What [`write_folder`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderWritten {
    /// Files of the previous export that this one did not write again, now removed.
    pub removed: Vec<String>,
}

/// Writes `files` into `dir` (created if missing) and replaces the previous export there:
/// the files the folder's [`MANIFEST`] lists and `files` does not name are removed, and the
/// manifest then lists `files`. Files the manifest does not list are never removed; one that
/// `files` would overwrite is refused before anything is written (exit 2), since no export
/// wrote it. A folder exported by a version without manifests is refused the same way.
pub fn write_folder(dir: &Path, files: &[CudaFile]) -> Result<FolderWritten> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Usage(format!(
            "--output {}: not a folder (--format cuda writes a folder of sources)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    let earlier = read_manifest(dir)?;
    let new: BTreeSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
    let foreign: Vec<&str> = new
        .iter()
        .copied()
        .filter(|n| !earlier.contains(*n))
        .filter(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
        .collect();
    if let Some(first) = foreign.first() {
        return Err(Error::Usage(format!(
            "{} exists and no earlier export wrote it (it is not listed in {}){}: move it \
             away, or export into a new or empty folder",
            dir.join(first).display(),
            dir.join(MANIFEST).display(),
            match foreign.len() {
                1 => String::new(),
                n => format!("; {} more such file(s)", n - 1),
            },
        )));
    }
    // Until the last step the manifest lists the old files and the new ones, so an export
    // stopped half-way still leaves every file it wrote listed for the next one to remove.
    let both: BTreeSet<&str> = earlier
        .iter()
        .map(String::as_str)
        .chain(new.iter().copied())
        .collect();
    write_manifest(dir, &both)?;
    for f in files {
        write_atomic(&dir.join(&f.name), f.contents.as_bytes())?;
    }
    let mut removed = Vec::new();
    for name in earlier.iter().filter(|n| !new.contains(n.as_str())) {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(name.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("cannot remove", &path, e)),
        }
    }
    write_manifest(dir, &new)?;
    Ok(FolderWritten { removed })
}

/// The file names `dir`'s [`MANIFEST`] lists (none when there is no manifest). A line that is
/// not the plain name of a file in the folder (`../x`, `a/b`, the manifest itself) is skipped
/// with a warning, so a hand-edited manifest can never remove anything outside the folder.
fn read_manifest(dir: &Path) -> Result<BTreeSet<String>> {
    let path = dir.join(MANIFEST);
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(Error::io("cannot read", &path, e)),
    };
    let mut names = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let name = line.trim();
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        let plain = Path::new(name).file_name().and_then(|n| n.to_str()) == Some(name);
        if !plain || name == MANIFEST || name == "." || name == ".." {
            eprintln!(
                "warning: {}:{}: '{name}' is not the name of a file in this folder; ignored",
                path.display(),
                i + 1
            );
            continue;
        }
        names.insert(name.to_string());
    }
    Ok(names)
}

/// Writes `dir`'s [`MANIFEST`] listing `names`.
fn write_manifest(dir: &Path, names: &BTreeSet<&str>) -> Result<()> {
    let mut text = String::from(
        "# The files `tune export --format cuda` wrote into this folder, one per line. The next\n\
         # export into this folder removes those it does not write again; other files stay.\n",
    );
    for name in names {
        text.push_str(name);
        text.push('\n');
    }
    write_atomic(&dir.join(MANIFEST), text.as_bytes())
}

/// One file of the export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaFile {
    pub name: String,
    pub contents: String,
}

/// The safe default of one (op, dtype): its kernel and the name it gets.
struct SafeDefault {
    op: String,
    dtype: String,
    tuned: TunedKernel,
    name: String,
    /// Where it may run: every shape at which the configuration stays valid.
    rule: Applicability,
}

/// A row with its kernel, the name it gets and where the rule says it may run.
struct Entry<'a> {
    row: &'a BestRow,
    tuned: TunedKernel,
    name: String,
    rule: Applicability,
    /// Why the row's figures are not of this source ([`untimed_note`]), if they are not.
    untimed: Option<String>,
}

/// What [`render`] made of a database's rows.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub files: Vec<CudaFile>,
    /// Rows rendered as tuned kernels (the rest of the `.cu` files are safe defaults).
    pub tuned: usize,
    /// What was left out, one sentence each: a row (`skipping the row op shape dtype on GPU
    /// (params): why`, a stale or hand-edited row whose configuration the op's spec no longer
    /// takes), or an op's safe default (a spec whose every configuration depends on the exact
    /// shape has none).
    pub skipped: Vec<String>,
    /// Rows rendered as another source than the one they were timed with, one sentence each
    /// (`op shape dtype on GPU: why`, [`untimed_note`]); their `.cu` files say so too.
    pub untimed: Vec<String>,
}

/// Renders the `.cu` files and the header for `rows`. `origin` names the database in the
/// generated comments; `templates` is where the op specs and templates are read from. A row
/// that does not render is left out (the header's dispatch falls back to the safe default
/// there) and said in [`Rendered::skipped`]; none rendering is an error.
pub fn render(rows: &[&BestRow], templates: Option<&Path>, origin: &str) -> Result<Rendered> {
    // The database's path is written into comments only.
    let origin = &in_comment(origin);
    let names = kernel_names(rows, templates)?;
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    let mut untimed_rows = Vec::new();
    for (row, name) in rows.iter().zip(names) {
        let tuned = match specialize(row, templates) {
            Ok(tuned) => tuned,
            Err(e) => {
                skipped.push(format!(
                    "skipping the row {} {} {} on {} ({}): cannot render it: {e}",
                    row.op, row.shape, row.dtype, row.gpu, row.params
                ));
                continue;
            }
        };
        let rule = applicability_of(&tuned);
        let untimed = untimed_note(row, &tuned);
        if let Some(why) = &untimed {
            untimed_rows.push(format!(
                "{} {} {} on {}: {why}",
                row.op, row.shape, row.dtype, row.gpu
            ));
        }
        entries.push(Entry {
            row,
            tuned,
            name,
            rule,
            untimed,
        });
    }
    // Every name of the export, tuned and default: a safe default takes the next free one.
    let mut taken: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    let mut files = Vec::new();
    for e in &entries {
        files.push(CudaFile {
            name: format!("{}.cu", e.name),
            contents: cu_file(e, origin),
        });
    }
    // One safe default per (op, dtype) of the export, in the order the rows name them.
    let mut defaults: Vec<SafeDefault> = Vec::new();
    let mut tried: Vec<(&str, &str)> = Vec::new();
    for e in &entries {
        let (op, dtype) = (e.row.op.as_str(), e.row.dtype.as_str());
        if tried.contains(&(op, dtype)) {
            continue;
        }
        tried.push((op, dtype));
        let tuned = match safe_default(op, dtype, templates) {
            Ok(tuned) => tuned,
            // Its tuned kernels still serve their shapes; ca_default returns NULL for it.
            Err(e) => {
                skipped.push(format!(
                    "no safe default for {op} {dtype} (ca_default and ca_select_or_default \
                     return NULL where no tuned entry serves): {e}"
                ));
                continue;
            }
        };
        let rule = default_applicability(&tuned)?;
        let name = unique_name(
            format!("{}_{}_default", tuned.op.spec.kernel, ident(dtype)),
            &mut taken,
        );
        let mut text = String::new();
        let _ = writeln!(
            text,
            "// Generated by cuda-autotune {} (`tune export --format cuda`): the safe default\n\
             // {} kernel for {}, bounds-checked and valid wherever ca_entry_admits() says;\n\
             // run it where ca_select() returns NULL (ca_select_or_default() does).\n\
             // Parameters: {}\n{}",
            env!("CARGO_PKG_VERSION"),
            in_comment(op),
            in_comment(dtype),
            in_comment(&params_text(&tuned).replace(';', " ")),
            launch_comment(&tuned.op, &name),
        );
        text.push_str(&namespaced(&tuned, &name));
        files.push(CudaFile {
            name: format!("{name}.cu"),
            contents: text,
        });
        defaults.push(SafeDefault {
            op: op.to_string(),
            dtype: dtype.to_string(),
            rule,
            tuned,
            name,
        });
    }
    if entries.is_empty() {
        return Err(Error::Usage(format!(
            "nothing to export: no row renders ({})",
            skipped.first().map_or("no rows", String::as_str)
        )));
    }
    files.push(CudaFile {
        name: HEADER.into(),
        contents: header(&entries, &defaults, origin),
    });
    Ok(Rendered {
        files,
        tuned: entries.len(),
        skipped,
        untimed: untimed_rows,
    })
}

/// A C identifier made of `s`: every character other than an ASCII letter or digit becomes `_`.
fn ident(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// `<kernel>_<dtype>_<shape>_<gpu>` per row (the key of a row, so names are unique; a counter
/// is added only if two GPU names differ in punctuation alone, or two ops share a kernel name).
fn kernel_names(rows: &[&BestRow], templates: Option<&Path>) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for row in rows {
        let kernel = Op::load(&row.op, templates)?.spec.kernel;
        let first = format!(
            "{kernel}_{}_{}_{}",
            ident(&row.dtype),
            ident(&row.shape),
            slug(&row.gpu).replace('-', "_")
        );
        unique_name(first, &mut names);
    }
    Ok(names)
}

/// `first`, or `first_2`, `first_3`, ... the first of them not in `taken`; added to `taken`.
/// Two ops built on one template share a kernel name, so their entries and safe defaults
/// would otherwise share a file.
fn unique_name(first: String, taken: &mut Vec<String>) -> String {
    let mut name = first.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{first}_{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// The kernel renamed to `name`, the rest inside `namespace ca_<name>` (includes stay
/// outside), and every macro the source defines undefined at the end.
fn namespaced(tuned: &TunedKernel, name: &str) -> String {
    let mut renamed = rename_identifier(&tuned.source, tuned.kernel_name(), name);
    // Prologue kernels are extern "C" too: two exported entries must not share their names.
    for p in &tuned.op.spec.prologue {
        renamed = rename_identifier(&renamed, &p.kernel, &prologue_name(tuned, name, &p.kernel));
    }
    let mut includes = String::new();
    let mut body = String::new();
    let mut macros: Vec<&str> = Vec::new();
    for line in renamed.lines() {
        let t = line.trim_start();
        if t.starts_with("#include") {
            includes.push_str(line);
            includes.push('\n');
            continue;
        }
        if let Some(rest) = t.strip_prefix("#define") {
            let m = rest
                .trim_start()
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("");
            if !m.is_empty() && !macros.contains(&m) {
                macros.push(m);
            }
        }
        body.push_str(line);
        body.push('\n');
    }
    let mut out = includes;
    let _ = writeln!(out, "namespace ca_{name} {{");
    out.push_str(&body);
    let _ = writeln!(out, "}}  // namespace ca_{name}");
    for m in macros {
        let _ = writeln!(out, "#undef {m}");
    }
    out
}

/// A prologue kernel's name without the op's kernel prefix: `repack` for `sgemm_repack`.
fn prologue_suffix<'a>(op: &Op, kernel: &'a str) -> &'a str {
    kernel
        .strip_prefix(op.spec.kernel.as_str())
        .unwrap_or(kernel)
        .trim_start_matches('_')
}

/// `<name>_<prologue suffix>`: `sgemm_repack` of the entry `sgemm_1023x1025x1027` becomes
/// `sgemm_1023x1025x1027_repack`.
fn prologue_name(tuned: &TunedKernel, name: &str, kernel: &str) -> String {
    format!("{name}_{}", prologue_suffix(&tuned.op, kernel))
}

/// The launch rule of `op` as `//` comment lines (the spec's text made [`in_comment`]).
fn launch_comment(op: &Op, name: &str) -> String {
    let l = &op.spec.launch;
    let mut lines = vec![format!(
        "Launch: {name}({}) with block = ({}), grid = ({}){}",
        op.spec.args.join(", "),
        l.block.join(", "),
        l.grid.join(", "),
        shared_rule(op, " ")
    )];
    for p in &op.spec.prologue {
        lines.push(format!(
            "Before it, where {}: <{name}_{}> with the same arguments, block = ({}), grid = ({})",
            p.when.as_deref().unwrap_or("always"),
            prologue_suffix(op, &p.kernel),
            p.block.join(", "),
            p.grid.join(", ")
        ));
    }
    lines.extend(scratch_lines(op));
    lines
        .iter()
        .map(|l| format!("// {}", in_comment(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One sentence per scratch buffer of `op` (not made [`in_comment`]): its argument and how
/// many elements it must hold at the caller's shape.
fn scratch_lines(op: &Op) -> Vec<String> {
    op.spec
        .buffers
        .iter()
        .filter(|b| b.role == crate::spec::ops::Role::Scratch)
        .map(|b| {
            format!(
                "Scratch buffer {} of the arguments: {} elements of device memory, written by the kernels before they read it (no initial contents; one per concurrent launch)",
                b.name, b.elements
            )
        })
        .collect()
}

/// Whether the kernels of `tuned` may touch the op's scratch buffers: the op has some, and
/// either its spec has no first kernels (its kernel fills them itself) or this configuration
/// launches one (a first kernel fills them, as sgemm's repack does for REPACK=1; an op whose
/// first kernels fill its scratch reads none where none runs).
fn uses_scratch(tuned: &TunedKernel) -> bool {
    let spec = &tuned.op.spec;
    spec.buffers
        .iter()
        .any(|b| b.role == crate::spec::ops::Role::Scratch)
        && (spec.prologue.is_empty() || !tuned.candidate.prologue.is_empty())
}

/// `,<sep>dynamic shared memory = EXPR bytes ...` when the op's launch asks for any, else
/// empty; `sep` is a space in a source's comment line, a line break in the header's list.
fn shared_rule(op: &Op, sep: &str) -> String {
    op.spec
        .launch
        .shared
        .as_ref()
        .map_or(String::new(), |expr| {
            format!(
                ",{sep}dynamic shared memory = {} bytes (over the op spec's defines, which \
                 the source need not hold; at the tuned shape it is the entry's shared_bytes; \
                 past 48 KB raise cudaFuncAttributeMaxDynamicSharedMemorySize to it first)",
                in_comment(expr)
            )
        })
}

/// `{bx u, by u, bz u}, {gx u, gy u, gz u}`: the block and grid fields of a header entry.
fn c_dims(d: &crate::model::limits::LaunchDims) -> String {
    format!(
        "{{{}u, {}u, {}u}}, {{{}u, {}u, {}u}}",
        d.block.0, d.block.1, d.block.2, d.grid.0, d.grid.1, d.grid.2
    )
}

/// This entry's prologue launches at its shape, one comment line each.
fn prologue_lines(e: &Entry) -> String {
    e.tuned
        .candidate
        .prologue
        .iter()
        .map(|(k, d)| {
            format!(
                "\n//   first {}: block ({}, {}, {}), grid ({}, {}, {}).",
                prologue_name(&e.tuned, &e.name, k),
                d.block.0,
                d.block.1,
                d.block.2,
                d.grid.0,
                d.grid.1,
                d.grid.2
            )
        })
        .collect()
}

fn cu_file(e: &Entry, origin: &str) -> String {
    let r = e.row;
    let mut s = String::new();
    let launch = e.tuned.candidate.launch.expect("not pruned");
    // A fraction of no named roof (an op without a baseline) says nothing: left out.
    let roof = r
        .frac_of_roof
        .filter(|_| !r.roof.trim().is_empty())
        .map(|f| format!(", {:.1} % of {}", f * 100.0, in_comment(&r.roof)))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "// Generated by cuda-autotune {} (`tune export --format cuda`) from {origin}.\n\
         // {} {} {}, tuned on {} (cc {}, {}) at {}: {} median, {:.1} {}{roof}.\n\
         // Parameters: {}\n\
         {}\n\
         //   = block ({}, {}, {}), grid ({}, {}, {}){} at {} (ca_entry_launch() gives them at another shape).{}\n\
         // Valid for: {}.",
        env!("CARGO_PKG_VERSION"),
        in_comment(&r.op),
        in_comment(&r.shape),
        in_comment(&r.dtype),
        in_comment(&r.gpu),
        in_comment(&r.compute_capability),
        crate::store::tuned::sms_text(r),
        in_comment(&r.tuned_at),
        super::format_ms(r.median_ms).replace('µ', "u"),
        r.throughput,
        in_comment(&r.unit),
        in_comment(
            &parse_params(&r.params)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        launch_comment(&e.tuned.op, &e.name),
        launch.block.0,
        launch.block.1,
        launch.block.2,
        launch.grid.0,
        launch.grid.1,
        launch.grid.2,
        if launch.shared > 0 {
            format!(", {} bytes of dynamic shared memory", launch.shared)
        } else {
            String::new()
        },
        in_comment(&r.shape),
        prologue_lines(e),
        in_comment(&rule_text(&e.rule, &r.shape)),
    );
    if let Some(why) = &e.untimed {
        let _ = writeln!(s, "// Not timed as it reads: {}.", in_comment(why));
    }
    s.push_str(&namespaced(&e.tuned, &e.name));
    s
}

fn rule_text(rule: &Applicability, shape: &str) -> String {
    match &rule.rule {
        None => format!("{shape} only"),
        Some(r) if r.is_always() => "every shape".into(),
        Some(_) => format!(
            "{shape} and every shape at which the tuner would render this same kernel (the \
             entry's admits in the header: ca_entry_admits)"
        ),
    }
}

/// `s` as text inside a C comment (`//` or `/* */`): on one line, so it cannot end a `//`
/// comment (control characters and line breaks become spaces), and unable to end a block
/// comment (`*/` becomes `* /`) or to splice the next line into the comment (a backslash
/// becomes `/`, and `??/`, the backslash as a trigraph, becomes `?? /`).
fn in_comment(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\\' => '/',
            c if c.is_control() || c.is_whitespace() => ' ',
            c => c,
        })
        .collect::<String>()
        .replace("*/", "* /")
        .replace("??/", "?? /")
}

/// A C string literal. Every `?` is escaped, so no `??/` trigraph can end it early.
fn c_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '?' => out.push_str("\\?"),
            '\n' => out.push_str("\\n"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    // An octal escape ends after three digits, unlike \x.
                    let _ = write!(out, "\\{b:03o}");
                }
            }
        }
    }
    out.push('"');
    out
}

/// A C double literal (`-1.0` for an unknown value).
fn c_double(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:?}"),
        _ => "-1.0".into(),
    }
}

/// The fields of one `ca_tuned_entry` initializer: a tuned entry, or a safe default (no row:
/// no timing, valid for every shape).
struct EntryC<'a> {
    op: &'a str,
    shape: &'a str,
    dims: Vec<u64>,
    dtype: &'a str,
    row: Option<&'a BestRow>,
    tuned: &'a TunedKernel,
    name: &'a str,
    rule: &'a Applicability,
    /// The entry whose rule functions this one calls ([`rule_owners`]).
    rule_fn: &'a str,
}

fn entry_c(e: &EntryC) -> String {
    let params: Vec<String> = e
        .tuned
        .candidate
        .config
        .values()
        .map(|(k, v)| {
            let text = v.to_string();
            match v {
                crate::spec::expr::Value::Int(i) => {
                    format!("{{{}, {}, {i}LL, 1}}", c_str(k), c_str(&text))
                }
                _ => format!("{{{}, {}, 0LL, 0}}", c_str(k), c_str(&text)),
            }
        })
        .collect();
    let launch = e.tuned.candidate.launch.expect("not pruned");
    let pre = e.tuned.candidate.prologue.first();
    let pre_dims = pre.map_or(
        crate::model::limits::LaunchDims {
            grid: (0, 0, 0),
            block: (0, 0, 0),
            shared: 0,
        },
        |(_, d)| *d,
    );
    let text = |f: fn(&BestRow) -> &str| c_str(e.row.map(f).unwrap_or(""));
    // The entry's rule function of a kind (NULL without a rule).
    let rule_fn = |name: fn(&str) -> String| match e.rule.rule {
        Some(_) => name(e.rule_fn),
        None => "NULL".to_string(),
    };
    format!(
        "    {{{op}, {shape}, {nd}, {{{dims}}}, {dtype}, {gpu}, {cc}, {kernel}, {source},\n     \
         {np}, {{{params}}},\n     \
         {launch}, {shared}u,\n     \
         {before}, {pre_launch},\n     \
         {ms}, {tp}, {unit}, {frac}, {roof}, {at},\n     \
         {exact}, {admits}, {launch_fn},\n     \
         {scratch}}},\n",
        op = c_str(e.op),
        shape = c_str(e.shape),
        nd = e.dims.len(),
        dims = c_ll_list(&e.dims),
        dtype = c_str(e.dtype),
        gpu = text(|r| &r.gpu),
        cc = text(|r| &r.compute_capability),
        kernel = c_str(e.name),
        source = c_str(&format!("{}.cu", e.name)),
        np = params.len(),
        params = params.join(", "),
        launch = c_dims(&launch),
        shared = launch.shared,
        before = pre
            .map(|(k, _)| c_str(&prologue_name(e.tuned, e.name, k)))
            .unwrap_or_else(|| "NULL".into()),
        pre_launch = c_dims(&pre_dims),
        ms = c_double(e.row.map(|r| r.median_ms)),
        tp = c_double(e.row.map(|r| r.throughput)),
        unit = text(|r| &r.unit),
        frac = c_double(e.row.and_then(|r| r.frac_of_roof)),
        roof = text(|r| &r.roof),
        at = text(|r| &r.tuned_at),
        exact = i32::from(e.rule.exact_only()),
        admits = rule_fn(admits_name),
        launch_fn = rule_fn(launch_name),
        scratch = i32::from(uses_scratch(e.tuned)),
    )
}

/// The name of the C function of an entry's [`Rule`].
fn admits_name(kernel: &str) -> String {
    format!("ca_admits_{kernel}")
}

/// The name of the C function of an entry's launch at a shape ([`Rule::launch_at`]).
fn launch_name(kernel: &str) -> String {
    format!("ca_launch_{kernel}")
}

/// `1LL, 2LL, ...`: the elements of a `long long` array initializer.
fn c_ll_list(values: &[u64]) -> String {
    values
        .iter()
        .map(|v| format!("{v}LL"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn header(entries: &[Entry], defaults: &[SafeDefault], origin: &str) -> String {
    let max_dims = entries.iter().map(|e| e.rule.dims.len()).max().unwrap_or(1);
    let max_params = entries
        .iter()
        .map(|e| e.tuned.candidate.config.values().len())
        .chain(
            defaults
                .iter()
                .map(|d| d.tuned.candidate.config.values().len()),
        )
        .max()
        .unwrap_or(1)
        .max(1);
    let mut s = String::new();
    write_intro(&mut s, origin);
    write_default_defines(&mut s, defaults);
    write_launch_rules(&mut s, entries);
    write_types(&mut s, max_dims, max_params);
    let owners = rule_owners(entries, defaults);
    write_rules(&mut s, entries, defaults, &owners);
    write_entries(&mut s, entries, defaults, &owners);
    write_select_functions(&mut s);
    s
}

/// The header's opening comment (what it holds and how to dispatch) and its prelude.
fn write_intro(s: &mut String, origin: &str) {
    let _ = write!(
        s,
        r#"/* {HEADER}: tuned CUDA kernels exported by cuda-autotune {version}
 * (`tune export --format cuda`) from {origin}. Generated; do not edit.
 *
 * One entry per tuned (op, dtype, shape, GPU). Entry e's kernel is the extern "C" __global__
 * function e->kernel in the file e->source (in this folder): the op's template rendered with
 * e's parameters for elements of type e->dtype, exactly as the tuner compiled and verified it
 * for e->shape. Kernels are named <kernel>_<dtype>_<shape>_<gpu>.
 *
 * The dispatch key is (op, dtype, shape): ca_select(op, dtype, dims, ndims), dtype as tuned
 * ("f32", "f64", "f16", "bf16"), returns the entry tuned for exactly that op, dtype and shape; else
 * the entry of the nearest tuned shape of that op and dtype (distance: the sum over dimensions
 * of |ln(dims[i] / e->dims[i])|) whose kernel is valid for dims (ca_entry_admits); else NULL.
 * An entry of another dtype is never returned: its kernel reads and writes elements of another
 * size.
 *
 * NULL means "use the safe default": ca_default(op, dtype) is the entry of a configuration of
 * the op's spec that is bounds-checked and valid wherever ca_entry_admits says, exported
 * for every op and dtype of this header that has one as <kernel>_<dtype>_default in
 * <kernel>_<dtype>_default.cu (no timing: median_ms is -1.0; where two ops share a kernel
 * name, the later one's name ends in _2, _3, ...). ca_select_or_default(op, dtype,
 * dims, ndims) returns ca_select's entry, else that one where it admits the shape; NULL for
 * an op or dtype this header does not hold, one without a safe default (an op whose every
 * configuration depends on the exact shape; the export said so), or a shape the safe
 * default does not admit.
 * ca_select_for(op, dtype, gpu, dims, ndims) also requires e->gpu to equal gpu (the CUDA
 * device name, as cudaDeviceProp::name) unless gpu is NULL.
 *
 * A kernel is valid for another shape when the tuner would have generated the same kernel
 * for it: kernels are rendered from the parameters and shape-dependent defines such as
 * EVEN_TILES (both dimensions multiples of TILE_DIM), never from the exact shape. Each
 * entry's e->admits(dims) checks that at dims, as the tuner does: the op spec's defines keep
 * the values the kernel was compiled with, its constraints hold, the grid and shared memory
 * stay within the device's limits and the same first kernel (e->before) applies. The spec's
 * expressions are written out in C with the entry's parameters folded in (the functions
 * below, one pair per distinct rule; 64-bit arithmetic, where an overflow or a division by
 * zero rules the shape out as it prunes a configuration). e->exact_only: the tuned shape only
 * (the spec has an expression of the shape the export cannot write out in C). Every
 * dimension must also be 1 to INT_MAX (the kernels take dimensions as int).
 *
 * Launch an entry at your shape with ca_entry_launch(e, dims, ndims, &l): it fills l.block,
 * l.grid and l.shared_bytes (and l.before_block and l.before_grid for e->before) from the op's
 * launch rule (below) with the entry's parameters; e->block and e->grid are those at e->dims.
 */
#ifndef CUDA_AUTOTUNE_TUNED_H
#define CUDA_AUTOTUNE_TUNED_H

#include <limits.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {{
#endif

"#,
        version = env!("CARGO_PKG_VERSION"),
    );
}

/// A `CA_<OP>_<DTYPE>_DEFAULT_KERNEL` / `_SOURCE` pair of defines per safe default.
fn write_default_defines(s: &mut String, defaults: &[SafeDefault]) {
    for d in defaults {
        let up = format!("{}_{}", ident(&d.op), ident(&d.dtype)).to_uppercase();
        let _ = writeln!(
            s,
            "/* {} {} safe default ({}): kernel {} in {}.cu. */\n\
             #define CA_{up}_DEFAULT_KERNEL {}\n#define CA_{up}_DEFAULT_SOURCE {}",
            in_comment(&d.op),
            in_comment(&d.dtype),
            in_comment(&params_text(&d.tuned).replace(';', " ")),
            d.name,
            d.name,
            c_str(&d.name),
            c_str(&format!("{}.cu", d.name)),
        );
    }
}

/// The comment that states each op's launch rule (and its prologue launches).
fn write_launch_rules(s: &mut String, entries: &[Entry]) {
    let mut ops: Vec<&Op> = Vec::new();
    for e in entries {
        if !ops.iter().any(|o| o.name() == e.tuned.op.name()) {
            ops.push(&e.tuned.op);
        }
    }
    let _ = writeln!(s, "\n/* Launch rules (ceil_div(a, b) = (a + b - 1) / b):");
    for op in &ops {
        let l = &op.spec.launch;
        let _ = writeln!(
            s,
            " *   {} (shape {}): <kernel>({}),\n *     block = ({}), grid = ({}){}",
            in_comment(op.name()),
            in_comment(&op.spec.dims.join("x")),
            in_comment(&op.spec.args.join(", ")),
            in_comment(&l.block.join(", ")),
            in_comment(&l.grid.join(", ")),
            shared_rule(op, "\n *     ")
        );
        for p in &op.spec.prologue {
            let _ = writeln!(
                s,
                " *     where {}: first <kernel>_{} (e->before), block = ({}), grid = ({})",
                in_comment(p.when.as_deref().unwrap_or("always")),
                in_comment(prologue_suffix(op, &p.kernel)),
                in_comment(&p.block.join(", ")),
                in_comment(&p.grid.join(", "))
            );
        }
        for line in scratch_lines(op) {
            let _ = writeln!(s, " *     {}", in_comment(&line));
        }
        if !scratch_lines(op).is_empty() {
            let _ = writeln!(
                s,
                " *     (entries with e->scratch == 0 never touch them: any pointer serves)"
            );
        }
    }
}

/// The size limits and the C types of the entries.
fn write_types(s: &mut String, max_dims: usize, max_params: usize) {
    let _ = write!(
        s,
        r#" */

#define CA_MAX_DIMS {max_dims}
#define CA_MAX_PARAMS {max_params}

typedef struct ca_param {{
    const char* name;
    const char* value;     /* as tuned, e.g. "64" or "on" */
    long long int_value;   /* the value when is_int, else 0 */
    int is_int;
}} ca_param;

typedef struct ca_tuned_entry {{
    const char* op;
    const char* shape;     /* e.g. "1000x1000"; "any" for a safe default */
    int ndims;
    long long dims[CA_MAX_DIMS];
    const char* dtype;     /* element type, e.g. "f32" */
    const char* gpu;       /* device name it was tuned on ("" for a safe default) */
    const char* compute_capability;
    const char* kernel;    /* extern "C" name of the kernel */
    const char* source;    /* its .cu file */
    int nparams;
    ca_param params[CA_MAX_PARAMS];
    unsigned int block[3]; /* threads per block */
    unsigned int grid[3];  /* blocks, at dims (ca_entry_launch: at another shape) */
    unsigned int shared_bytes; /* dynamic shared memory per block, at dims; over 48 KB call
                              cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes) once
                              before the first launch */
    const char* before;    /* kernel to launch first with the same arguments; NULL: none */
    unsigned int before_block[3];
    unsigned int before_grid[3]; /* at dims (ca_entry_launch: at another shape) */
    double median_ms;      /* -1.0 for a safe default (not timed) */
    double throughput;
    const char* unit;
    double frac_of_roof;   /* of the same run's roof; -1.0 when unknown */
    const char* roof;
    const char* tuned_at;
    int exact_only;        /* 1: valid for dims only */
    int (*admits)(const long long* dims); /* 1 where the tuner would keep this configuration
                                             at dims and render the same kernel; NULL with
                                             exact_only */
    void (*launch)(const long long* dims, unsigned int* l); /* its launch at dims: use
                                             ca_entry_launch */
    int scratch;           /* 1: its kernels may use the op's scratch buffers, which must hold the
                              elements the launch rules above give for your shape; 0: they
                              never touch them (the op has none, or this entry launches no
                              first kernel to fill them) */
}} ca_tuned_entry;

/* A launch: what ca_entry_launch gives at a shape. */
typedef struct ca_launch {{
    unsigned int block[3];
    unsigned int grid[3];
    unsigned int shared_bytes;
    unsigned int before_block[3]; /* e->before's, zeros when NULL */
    unsigned int before_grid[3];
}} ca_launch;

"#
    );
}

/// Per entry (the tuned ones, then the safe defaults), the name of the first entry of the same
/// op with the same [`Rule`]: its C functions serve both (many rows of one op differ in the
/// GPU only, or in parameters the rule folds away).
fn rule_owners<'a>(entries: &'a [Entry], defaults: &'a [SafeDefault]) -> Vec<&'a str> {
    let all: Vec<(&str, &str, &Applicability)> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.row.op.as_str(), &e.rule))
        .chain(
            defaults
                .iter()
                .map(|d| (d.name.as_str(), d.op.as_str(), &d.rule)),
        )
        .collect();
    all.iter()
        .map(|&(name, op, a)| {
            all.iter()
                .find(|(_, o, b)| *o == op && b.rule.is_some() && b.rule == a.rule)
                .map_or(name, |(n, _, _)| *n)
        })
        .collect()
}

/// The helpers and each entry's [`Rule`] as a C function, then the start of the entries.
fn write_rules(s: &mut String, entries: &[Entry], defaults: &[SafeDefault], owners: &[&str]) {
    let _ = write!(
        s,
        "\n/* Where each entry's kernel may run: the op spec's defines, constraints and launch \
         limits\n   with the entry's parameters, as functions of the shape. */\n{}",
        crate::spec::rule::C_HELPERS
    );
    let rules = entries
        .iter()
        .map(|e| (&e.name, &e.rule, &e.tuned))
        .chain(defaults.iter().map(|d| (&d.name, &d.rule, &d.tuned)));
    for ((name, a, tuned), owner) in rules.zip(owners) {
        if let Some(rule) = a.rule.as_ref().filter(|_| name == owner) {
            s.push('\n');
            s.push_str(&rule.c_function(&admits_name(name), &tuned.op.spec.dims));
            s.push('\n');
            s.push_str(&rule.c_launch_function(&launch_name(name)));
        }
    }
    s.push_str("\nstatic const ca_tuned_entry ca_tuned_entries[] = {\n");
}

/// The tuned entries, then the safe defaults, as C initializers.
fn write_entries(s: &mut String, entries: &[Entry], defaults: &[SafeDefault], owners: &[&str]) {
    let mut owner = owners.iter();
    for e in entries {
        s.push_str(&entry_c(&EntryC {
            op: &e.row.op,
            shape: &e.row.shape,
            dims: parse_dims(&e.row.shape).unwrap_or_default(),
            dtype: &e.row.dtype,
            row: Some(e.row),
            tuned: &e.tuned,
            name: &e.name,
            rule: &e.rule,
            rule_fn: owner.next().expect("one per entry"),
        }));
    }
    s.push_str(
        "};\n\n/* The safe default of each op and dtype (block and grid at dims). */\nstatic const ca_tuned_entry ca_default_entries[] = {\n",
    );
    for d in defaults {
        s.push_str(&entry_c(&EntryC {
            op: &d.op,
            shape: "any",
            dims: d.tuned.shape.dims.clone(),
            dtype: &d.dtype,
            row: None,
            tuned: &d.tuned,
            name: &d.name,
            rule: &d.rule,
            rule_fn: owner.next().expect("one per entry"),
        }));
    }
}

/// The C functions that select an entry for a shape, and the header's end.
fn write_select_functions(s: &mut String) {
    write_entry_tests(s);
    write_select_for(s);
    write_default_lookup(s);
    let _ = write!(
        s,
        r#"#ifdef __cplusplus
}}
#endif

#endif /* CUDA_AUTOTUNE_TUNED_H */
"#
    );
}

/// The end of the default entries, their counts, and the tests `ca_select_for` applies to an
/// entry: whether its kernel admits a shape, how far its shape is, and whether it is of an
/// op, dtype and GPU.
fn write_entry_tests(s: &mut String) {
    let _ = write!(
        s,
        r#"}};

#define CA_TUNED_COUNT ((int)(sizeof(ca_tuned_entries) / sizeof(ca_tuned_entries[0])))
#define CA_DEFAULT_COUNT ((int)(sizeof(ca_default_entries) / sizeof(ca_default_entries[0])))

/* 1 when entry e's kernel is valid for the shape dims[0..ndims) (see the top of this file). */
static inline int ca_entry_admits(const ca_tuned_entry* e, const long long* dims, int ndims)
{{
    int i, same = 1;
    if (e == NULL || dims == NULL || ndims != e->ndims) return 0;
    for (i = 0; i < ndims; ++i) {{
        if (dims[i] < 1 || dims[i] > INT_MAX) return 0;
        if (dims[i] != e->dims[i]) same = 0;
    }}
    if (same) return 1;
    if (e->exact_only || e->admits == NULL) return 0;
    return e->admits(dims);
}}

/* The launch of entry e at dims: 1 with *out filled where e admits dims, else 0. */
static inline int ca_entry_launch(const ca_tuned_entry* e, const long long* dims, int ndims,
                                  ca_launch* out)
{{
    unsigned int l[13];
    int i;
    if (out == NULL || !ca_entry_admits(e, dims, ndims)) return 0;
    if (e->launch == NULL) {{
        /* exact_only: its own shape. */
        for (i = 0; i < 3; ++i) {{
            l[i] = e->block[i];
            l[3 + i] = e->grid[i];
            l[7 + i] = e->before_block[i];
            l[10 + i] = e->before_grid[i];
        }}
        l[6] = e->shared_bytes;
    }} else {{
        e->launch(dims, l);
    }}
    for (i = 0; i < 3; ++i) {{
        out->block[i] = l[i];
        out->grid[i] = l[3 + i];
        out->before_block[i] = l[7 + i];
        out->before_grid[i] = l[10 + i];
    }}
    out->shared_bytes = l[6];
    return 1;
}}

/* exp(sum |ln(dims[i] / e->dims[i])|) = the product of max/min ratios: the same order as the
   distance above, without libm. */
static inline double ca_shape_ratio(const ca_tuned_entry* e, const long long* dims)
{{
    double r = 1.0;
    int i;
    for (i = 0; i < e->ndims; ++i) {{
        double a = (double)dims[i], b = (double)e->dims[i];
        r *= a > b ? a / b : b / a;
    }}
    return r;
}}

/* 1 when entry e is of op and dtype, on gpu (any GPU when gpu is NULL), with ndims dims. */
static inline int ca_entry_is(const ca_tuned_entry* e, const char* op, const char* dtype,
                              const char* gpu, int ndims)
{{
    return strcmp(e->op, op) == 0 && strcmp(e->dtype, dtype) == 0 && e->ndims == ndims &&
           (gpu == NULL || strcmp(e->gpu, gpu) == 0);
}}

"#
    );
}

/// `ca_select_for` (exact, else the nearest valid entry) and `ca_select` (on any GPU).
fn write_select_for(s: &mut String) {
    let _ = write!(
        s,
        r#"/* The entry for op on dtype elements at dims: exact, else the nearest valid one of the same
   dtype, else NULL (use the safe default, ca_default). gpu: the device name to match, or
   NULL for any. */
static inline const ca_tuned_entry* ca_select_for(const char* op, const char* dtype,
                                                  const char* gpu, const long long* dims,
                                                  int ndims)
{{
    const ca_tuned_entry* best = NULL;
    double best_ratio = 0.0;
    int i, j, exact;
    if (op == NULL || dtype == NULL || dims == NULL) return NULL;
    for (i = 0; i < CA_TUNED_COUNT; ++i) {{
        const ca_tuned_entry* e = &ca_tuned_entries[i];
        if (!ca_entry_is(e, op, dtype, gpu, ndims)) continue;
        exact = 1;
        for (j = 0; j < ndims; ++j) {{
            if (dims[j] != e->dims[j]) exact = 0;
        }}
        if (exact) return e;
    }}
    for (i = 0; i < CA_TUNED_COUNT; ++i) {{
        const ca_tuned_entry* e = &ca_tuned_entries[i];
        double ratio;
        if (!ca_entry_is(e, op, dtype, gpu, ndims)) continue;
        if (!ca_entry_admits(e, dims, ndims)) continue;
        ratio = ca_shape_ratio(e, dims);
        if (best == NULL || ratio < best_ratio) {{
            best = e;
            best_ratio = ratio;
        }}
    }}
    return best;
}}

/* ca_select_for on any GPU. */
static inline const ca_tuned_entry* ca_select(const char* op, const char* dtype,
                                              const long long* dims, int ndims)
{{
    return ca_select_for(op, dtype, NULL, dims, ndims);
}}

"#
    );
}

/// `ca_default`, `ca_select_or_default` and `ca_entry_param`.
fn write_default_lookup(s: &mut String) {
    let _ = write!(
        s,
        r#"/* The safe default of op on dtype elements (valid where ca_entry_admits says), or NULL when
   this header holds no entry of that op and dtype. */
static inline const ca_tuned_entry* ca_default(const char* op, const char* dtype)
{{
    int i;
    if (op == NULL || dtype == NULL) return NULL;
    for (i = 0; i < CA_DEFAULT_COUNT; ++i) {{
        const ca_tuned_entry* e = &ca_default_entries[i];
        if (strcmp(e->op, op) == 0 && strcmp(e->dtype, dtype) == 0) return e;
    }}
    return NULL;
}}

/* ca_select, else the safe default of op and dtype where it admits the shape: NULL for an op
   or dtype this header does not hold, one without a safe default (the export said so), or a
   shape the default does not admit. */
static inline const ca_tuned_entry* ca_select_or_default(const char* op, const char* dtype,
                                                         const long long* dims, int ndims)
{{
    const ca_tuned_entry* e = ca_select(op, dtype, dims, ndims);
    if (e == NULL) {{
        e = ca_default(op, dtype);
        if (e != NULL && !ca_entry_admits(e, dims, ndims)) e = NULL;
    }}
    return e;
}}

/* The parameter `name` of e, or NULL. */
static inline const ca_param* ca_entry_param(const ca_tuned_entry* e, const char* name)
{{
    int i;
    for (i = 0; e != NULL && i < e->nparams; ++i) {{
        if (strcmp(e->params[i].name, name) == 0) return &e->params[i];
    }}
    return NULL;
}}

"#
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text of a row (a GPU name, a roof, the database's path) written into a comment stays
    /// inside it: a line break cannot start a line of code, `*/` cannot end a block comment.
    #[test]
    fn row_text_cannot_leave_a_comment() {
        assert_eq!(in_comment("a\r\nb\tc"), "a  b c");
        assert_eq!(in_comment("x */ y"), "x * / y");
        assert_eq!(in_comment("x \\"), "x /");
        assert_eq!(in_comment("x ??/"), "x ?? /");
        let mut row = crate::store::best::shipped_best()
            .into_iter()
            .find(|r| r.op == "transpose")
            .unwrap();
        row.gpu = "GPU\nint injected = 1; //".into();
        row.roof = "copy */ int injected = 2; /*".into();
        row.tuned_at = "now\r\nint injected = 3;".into();
        let files = render(&[&row], None, "db\nint injected = 4; */ int injected = 5;")
            .unwrap()
            .files;
        for f in &files {
            for line in f.contents.lines() {
                // A line with a string literal may hold `*/` inside the literal.
                let ended = !line.contains('"') && line.contains("*/ int injected");
                assert!(
                    !line.trim_start().starts_with("int injected") && !ended,
                    "{}: {line}",
                    f.name
                );
            }
        }
        let cu = &files[0].contents;
        assert!(cu.starts_with("// Generated"), "{cu}");
        assert!(cu.contains("tuned on GPU int injected = 1; //"), "{cu}");
    }

    /// A row's roof phrase names its roof; a row without a roof name has none.
    #[test]
    fn a_row_without_a_roof_name_has_no_roof_phrase() {
        let mut row = crate::store::best::shipped_best()
            .into_iter()
            .find(|r| r.op == "transpose")
            .unwrap();
        row.frac_of_roof = Some(0.9);
        row.roof = "copy_vec4".into();
        let cu = |row: &BestRow| {
            render(&[row], None, "db").unwrap().files[0]
                .contents
                .clone()
        };
        let named = cu(&row);
        assert!(named.contains(", 90.0 % of copy_vec4.\n"), "{named}");
        row.roof = String::new();
        let none = cu(&row);
        assert!(!none.contains("% of"), "{none}");
        let line = none.lines().nth(1).unwrap();
        assert!(line.ends_with(" GB/s."), "{line}");
    }

    #[test]
    fn c_strings_are_escaped() {
        assert_eq!(c_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(c_str("??/"), "\"\\?\\?/\"");
        assert_eq!(c_str("µ"), "\"\\302\\265\"");
        assert_eq!(c_double(None), "-1.0");
        assert_eq!(c_double(Some(2.0)), "2.0");
        assert_eq!(c_double(Some(0.5)), "0.5");
    }
}
