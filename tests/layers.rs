//! The library's layering: every file in src/ imports (`crate::...`) only from its own layer
//! or a layer below it, and modules do not import each other in a cycle. Test modules
//! (`#[cfg(test)] mod ...`) and comments are not read: tests may reach anywhere, and a doc
//! link is not a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first. A file's layer is its folder under src/ (or, for a file directly
/// in src/, its name); a `crate::NAME` reference is to the layer NAME names.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["model"],
    &["spec"],
    &["cuda"],
    &["measure"],
    &["isolate"],
    &["store"],
    &["search"],
    &["pipeline"],
    &["export"],
    &["cluster"],
    &["check"],
    &["cli"],
    &["main"],
];

fn rank(name: &str) -> Option<usize> {
    LAYERS.iter().position(|names| names.contains(&name))
}

/// `src/measure/bench.rs` → ("measure", "measure::bench"); `src/check.rs` → ("check", "check").
fn place(path: &str) -> (String, String) {
    let rel = path.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Vec<&str> = rel.split('/').collect();
    if parts.len() > 1 && parts.last() == Some(&"mod") {
        parts.pop();
    }
    (parts[0].to_string(), parts.join("::"))
}

/// The text of a file without its test modules and comments.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the item that follows: to the brace that closes it (or its `;`).
            let mut depth = 0i64;
            let mut opened = false;
            for next in lines.by_ref() {
                let code = next.split("//").next().unwrap_or("");
                depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
                opened |= code.contains('{');
                if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// Every `crate::` path in `code`, grouped imports (`crate::{a, b::c}`) expanded, as written.
fn crate_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `cuda_autotune::crate::` cannot occur; `mycrate::` is not ours
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let item = item.trim();
                if !item.is_empty() {
                    paths.push(format!("crate::{item}"));
                }
            }
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        paths.push(format!("crate::{}", rest[..end].trim_end_matches(':')));
    }
    paths
}

/// The layering violations among `files` (path under the repository, text): upward imports,
/// files or imports outside every layer, and import cycles between modules.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        if path == "src/lib.rs" {
            continue; // declares the layers
        }
        let (layer, module) = place(path);
        let Some(from) = rank(&layer) else {
            found.push(format!(
                "{path}: folder '{layer}' is in no layer (add it to LAYERS)"
            ));
            continue;
        };
        for import in crate_paths(&code_of(text)) {
            let segments: Vec<&str> = import.split("::").skip(1).collect();
            let Some(to) = segments.first().and_then(|s| rank(s)) else {
                found.push(format!("{path}: `{import}` leads to no known layer"));
                continue;
            };
            if to > from {
                found.push(format!(
                    "{path}: `{import}` imports layer '{}' from the lower layer '{layer}'",
                    segments[0]
                ));
            }
            // The module imported: layer::module where the layer has modules, else the layer.
            let target = match segments.as_slice() {
                [top, sub, ..]
                    if files.iter().any(|(p, _)| {
                        p == &format!("src/{top}/{sub}.rs")
                            || p == &format!("src/{top}/{sub}/mod.rs")
                    }) =>
                {
                    format!("{top}::{sub}")
                }
                [top, ..] => top.to_string(),
                [] => continue,
            };
            if target != module && !module.starts_with(&format!("{target}::")) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    found.extend(cycles(&edges));
    found
}

/// One line per import cycle among modules (each cycle reported once).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            // Start each cycle at its smallest name so one cycle is one report.
            let min = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
            cycle.rotate_left(min);
            found.insert(cycle);
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, stack, done, found);
        }
        stack.pop();
        done.insert(node.to_string());
    }
    let mut found = BTreeSet::new();
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        visit(node, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
        .into_iter()
        .map(|c| format!("import cycle: {} -> {}", c.join(" -> "), c[0]))
        .collect()
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under the root");
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((rel.to_string_lossy().replace('\\', "/"), text));
        }
    }
}

#[test]
fn every_import_points_down_and_there_are_no_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), root, &mut files);
    assert!(files.len() > 20, "read src/: {} files", files.len());
    let found = violations(&files);
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

fn fake(path: &str, text: &str) -> (String, String) {
    (path.to_string(), text.to_string())
}

#[test]
fn an_upward_import_is_named_with_its_file() {
    let files = [
        fake("src/model/shape.rs", "use crate::pipeline::tune;\n"),
        fake("src/pipeline/mod.rs", "pub fn tune() {}\n"),
    ];
    let found = violations(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/model/shape.rs: `crate::pipeline::tune`"),
        "{found:?}"
    );
    // Grouped imports are read too; downward ones pass.
    let files = [fake(
        "src/store/run.rs",
        "use crate::{error::Result, model::shape::Shape, cli::Cli};\n",
    )];
    let found = violations(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("`crate::cli::Cli`"), "{found:?}");
}

#[test]
fn test_modules_and_comments_are_not_imports() {
    let text = "//! See [`crate::cli`].\nuse crate::error::Result;\n\n#[cfg(test)]\nmod tests {\n    use crate::cli::Cli;\n    fn f() { let _ = 1; }\n}\n";
    assert!(violations(&[fake("src/model/shape.rs", text)]).is_empty());
}

#[test]
fn a_cycle_between_modules_of_one_layer_is_found() {
    let files = [
        fake("src/store/run.rs", "use crate::store::best::BestRow;\n"),
        fake("src/store/best.rs", "use crate::store::run::Record;\n"),
    ];
    let found = violations(&files);
    assert_eq!(
        found,
        ["import cycle: store::best -> store::run -> store::best"],
        "{found:?}"
    );
}

#[test]
fn a_folder_outside_the_layers_is_reported() {
    let found = violations(&[fake("src/misc/util.rs", "")]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("'misc' is in no layer"), "{found:?}");
}
