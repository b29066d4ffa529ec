//! The library's layering: every file in src/ imports only from its own layer or a layer below
//! it, and modules do not import each other in a cycle, inside a folder or across folders.
//!
//! Each file is parsed with `syn`, so an import is read as the compiler reads it: `crate::`,
//! `self::`, `super::` (any number of them) and child-module paths are resolved to the module
//! they name, nested groups (`crate::{model::{shape::Shape}, cli::Cli}`) yield every path, and
//! paths in macro bodies (`format!("{}", crate::x::f())`) count. Strings and comments are not
//! code, so nothing in them counts, and test-only items (`#[cfg(test)]`) are not read: tests may
//! reach anywhere. A name a module re-exports (`pub use b::Item` in pipeline/mod.rs) is followed
//! to the module that defines it, so a cycle through a re-export is still a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Attribute, ImplItem, Item, Meta, Token, TraitItem, UseTree};

/// The layers, lowest first. A file's layer is its folder under src/ (or, for a file directly
/// in src/, its name); an import's layer is the first segment of the module path it resolves to.
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

/// One path into the crate, read from a file.
#[derive(Debug, Clone)]
struct Import {
    /// The line it is written on.
    line: usize,
    /// As written: `super::b::Item`.
    written: String,
    /// The path from the crate root it names: ["pipeline", "b", "Item"].
    resolved: Vec<String>,
    /// For a `use` directly in the file's module: the name it binds there (`*` for a glob).
    binds: Option<String>,
}

impl Import {
    /// `crate::pipeline::b::Item`.
    fn absolute(&self) -> String {
        std::iter::once("crate")
            .chain(self.resolved.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("::")
    }

    /// The import as written, with the path it resolves to when it is written another way.
    fn shown(&self) -> String {
        let absolute = self.absolute();
        if absolute == self.written {
            format!("`{absolute}`")
        } else {
            format!("`{}` (= `{absolute}`)", self.written)
        }
    }
}

/// What one file says about the crate's modules.
#[derive(Debug, Default)]
struct Parsed {
    imports: Vec<Import>,
    /// Names of the items the file's module defines (functions, types, modules, ...).
    defines: BTreeSet<String>,
    /// Paths that lead nowhere (`super::` above the crate root), as messages.
    errors: Vec<String>,
}

/// Whether a `cfg` predicate holds only in test builds: `test`, `all(.., test, ..)`, or an `any`
/// whose every branch needs `test`.
fn needs_test(meta: &Meta) -> bool {
    let list = |m: &Meta| -> Vec<Meta> {
        m.require_list()
            .and_then(|l| l.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated))
            .map(|p| p.into_iter().collect())
            .unwrap_or_default()
    };
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(l) if l.path.is_ident("all") => list(meta).iter().any(needs_test),
        Meta::List(l) if l.path.is_ident("any") => {
            let branches = list(meta);
            !branches.is_empty() && branches.iter().all(needs_test)
        }
        _ => false,
    }
}

fn test_only(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<Meta>().is_ok_and(|m| needs_test(&m)))
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The name an item defines in its module, if any.
fn item_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        Item::Mod(i) => &i.ident,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Non-test child modules declared among `items` (`mod a;` or `mod a { .. }`).
fn child_modules(items: &[Item]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|item| match item {
            Item::Mod(m) if !test_only(&m.attrs) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// Walks a file, keeping the module it is in (inline `mod` blocks included).
struct Reader {
    /// The module being read, from the crate root: ["pipeline", "a"].
    module: Vec<String>,
    /// The child modules of each module on the way in, innermost last: a path that starts
    /// with one of the innermost names is relative to the module being read.
    children: Vec<BTreeSet<String>>,
    /// How deep the reader is in items (0: the file's own items).
    depth: usize,
    parsed: Parsed,
}

impl Reader {
    /// The crate path `written` names, from where the reader is; `None` for a path outside
    /// the crate (`std::..`, another crate, a local name).
    fn resolve(&self, written: &[String]) -> Option<Result<Vec<String>, String>> {
        let first = written.first()?;
        match first.as_str() {
            "crate" | "$crate" => Some(Ok(written[1..].to_vec())),
            "self" => Some(Ok(self
                .module
                .iter()
                .chain(&written[1..])
                .cloned()
                .collect())),
            "super" => {
                let ups = written.iter().take_while(|s| *s == "super").count();
                if ups > self.module.len() {
                    return Some(Err(format!(
                        "`{}` goes above the crate root",
                        written.join("::")
                    )));
                }
                let base = &self.module[..self.module.len() - ups];
                Some(Ok(base.iter().chain(&written[ups..]).cloned().collect()))
            }
            name if self.children.last().is_some_and(|c| c.contains(name)) => {
                Some(Ok(self.module.iter().chain(written).cloned().collect()))
            }
            _ => None,
        }
    }

    fn record(&mut self, written: Vec<String>, line: usize, binds: Option<String>) {
        match self.resolve(&written) {
            Some(Ok(resolved)) => self.parsed.imports.push(Import {
                line,
                written: written.join("::"),
                resolved,
                binds,
            }),
            Some(Err(message)) => self.parsed.errors.push(format!("{line}: {message}")),
            None => {}
        }
    }

    /// Every path of a use tree, nested groups expanded: `a::{b::{c}, d}` → a::b::c, a::d.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &UseTree, top: bool) {
        let line = |ident: &syn::Ident| ident.span().start().line;
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, top);
                prefix.pop();
            }
            UseTree::Name(n) if n.ident == "self" => {
                // `a::{self}` imports `a` itself.
                let binds = prefix.last().cloned().filter(|_| top);
                self.record(prefix.clone(), line(&n.ident), binds);
            }
            UseTree::Name(n) => {
                let binds = top.then(|| n.ident.to_string());
                let path = prefix
                    .iter()
                    .cloned()
                    .chain([n.ident.to_string()])
                    .collect();
                self.record(path, line(&n.ident), binds);
            }
            UseTree::Rename(r) => {
                let binds = top.then(|| r.rename.to_string());
                let path = prefix
                    .iter()
                    .cloned()
                    .chain([r.ident.to_string()])
                    .collect();
                self.record(path, line(&r.ident), binds);
            }
            UseTree::Glob(g) => {
                let binds = top.then(|| "*".to_string());
                self.record(prefix.clone(), g.star_token.span.start().line, binds);
            }
            UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix, item, top);
                }
            }
        }
    }

    /// Crate paths in a macro body: its tokens hold no strings' contents or comments, only
    /// literals and identifiers, so `crate :: a :: b` sequences are paths.
    fn tokens(&mut self, stream: TokenStream) {
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        let colons = |at: usize| {
            matches!(&tokens.get(at), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
                && matches!(&tokens.get(at + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
        };
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(first) if !(i >= 2 && colons(i - 2)) && colons(i + 1) => {
                    let dollar = i > 0
                        && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    let mut path = vec![if dollar {
                        format!("${first}")
                    } else {
                        first.to_string()
                    }];
                    let mut at = i + 1;
                    while colons(at) {
                        let Some(TokenTree::Ident(next)) = tokens.get(at + 2) else {
                            break;
                        };
                        path.push(next.to_string());
                        at += 3;
                    }
                    self.record(path, first.span().start().line, None);
                    i = at;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast Item) {
        if test_only(item_attrs(item)) {
            return;
        }
        match item {
            Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    self.module.push(m.ident.to_string());
                    self.children.push(child_modules(items));
                    self.depth += 1;
                    for inner in items {
                        self.visit_item(inner);
                    }
                    self.depth -= 1;
                    self.children.pop();
                    self.module.pop();
                }
            }
            Item::Use(u) => {
                if u.leading_colon.is_none() {
                    self.use_tree(&mut Vec::new(), &u.tree, self.depth == 0);
                }
            }
            _ => {
                self.depth += 1;
                visit::visit_item(self, item);
                self.depth -= 1;
            }
        }
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        let attrs = match item {
            ImplItem::Const(i) => &i.attrs,
            ImplItem::Fn(i) => &i.attrs,
            ImplItem::Type(i) => &i.attrs,
            ImplItem::Macro(i) => &i.attrs,
            _ => return,
        };
        if !test_only(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        let attrs = match item {
            TraitItem::Const(i) => &i.attrs,
            TraitItem::Fn(i) => &i.attrs,
            TraitItem::Type(i) => &i.attrs,
            TraitItem::Macro(i) => &i.attrs,
            _ => return,
        };
        if !test_only(attrs) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        // One segment (`self`, a local) names no module; `::x` is another crate.
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let written = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path.segments[0].ident.span().start().line;
            self.record(written, line, None);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }

    fn visit_attribute(&mut self, _: &'ast Attribute) {
        // Attributes hold doc text and derive lists, not imports.
    }
}

/// What the file `text` of module `module` ("pipeline::a", "" for the crate root) imports.
fn parse(module: &str, text: &str) -> Result<Parsed, String> {
    let file = syn::parse_file(text).map_err(|e| {
        let at = e.span().start();
        format!("{}:{}: {e}", at.line, at.column + 1)
    })?;
    let mut reader = Reader {
        module: module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        children: vec![child_modules(&file.items)],
        depth: 0,
        parsed: Parsed::default(),
    };
    for item in &file.items {
        if !test_only(item_attrs(item)) {
            reader.parsed.defines.extend(item_name(item));
        }
        reader.visit_item(item);
    }
    Ok(reader.parsed)
}

/// Every module's parse, by module path.
type Modules = BTreeMap<String, Parsed>;

/// The module file that `path` (from the crate root) leads to, after following re-exports:
/// the longest prefix that is a module file, then, while the next name is one that module
/// imports rather than defines, the path that import names.
fn target(path: &[String], modules: &Modules) -> Option<String> {
    let mut path = path.to_vec();
    let mut first = None;
    for _ in 0..16 {
        let Some((len, parsed)) = (1..=path.len())
            .rev()
            .find_map(|n| modules.get(&path[..n].join("::")).map(|p| (n, p)))
        else {
            return first;
        };
        let module = path[..len].join("::");
        first.get_or_insert_with(|| module.clone());
        let Some(name) = path.get(len) else {
            return Some(module);
        };
        if parsed.defines.contains(name) {
            return Some(module);
        }
        let named = parsed
            .imports
            .iter()
            .find(|i| i.binds.as_deref() == Some(name.as_str()));
        // A glob counts when the module it reads defines or imports the name (one step: a glob
        // of a glob is not followed).
        let via_glob = || {
            parsed
                .imports
                .iter()
                .filter(|i| i.binds.as_deref() == Some("*"))
                .find(|glob| {
                    modules.get(&glob.resolved.join("::")).is_some_and(|g| {
                        g.defines.contains(name)
                            || g.imports.iter().any(|i| i.binds.as_deref() == Some(name))
                    })
                })
        };
        let Some(import) = named.or_else(via_glob) else {
            return Some(module);
        };
        let mut next = import.resolved.clone();
        if import.binds.as_deref() == Some("*") {
            next.push(name.clone());
        }
        next.extend(path[len + 1..].iter().cloned());
        path = next;
    }
    first // a re-export loop (the compiler rejects it): the module first named
}

/// The layering violations among `files` (path under the repository, text): files that do not
/// parse, upward imports, files or imports outside every layer, and import cycles.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut modules = Modules::new();
    let mut layers = BTreeMap::new();
    let mut paths = BTreeMap::new();
    for (path, text) in files {
        if path == "src/lib.rs" {
            continue; // declares the layers
        }
        let (layer, module) = place(path);
        if rank(&layer).is_none() {
            found.push(format!(
                "{path}: folder '{layer}' is in no layer (add it to LAYERS)"
            ));
            continue;
        }
        match parse(&module, text) {
            Ok(parsed) => {
                found.extend(parsed.errors.iter().map(|e| format!("{path}:{e}")));
                layers.insert(module.clone(), layer);
                paths.insert(module.clone(), path.clone());
                modules.insert(module, parsed);
            }
            Err(e) => found.push(format!("{path}:{e}")),
        }
    }
    // module → imported module → the first import that makes the edge, as "file:line `path`".
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (module, parsed) in &modules {
        let (layer, path) = (&layers[module], &paths[module]);
        for import in &parsed.imports {
            let at = format!("{path}:{}", import.line);
            let Some(to) = import.resolved.first().and_then(|s| rank(s)) else {
                found.push(format!("{at}: {} leads to no known layer", import.shown()));
                continue;
            };
            if to > rank(layer).unwrap_or(0) {
                found.push(format!(
                    "{at}: {} imports layer '{}' from the lower layer '{layer}'",
                    import.shown(),
                    import.resolved[0]
                ));
            }
            let target =
                target(&import.resolved, &modules).unwrap_or_else(|| import.resolved[0].clone());
            let named = import.resolved.join("::");
            let via = if named == target || named.starts_with(&format!("{target}::")) {
                String::new()
            } else {
                format!(", re-exported from {target}")
            };
            // A module may use its own folder's mod.rs (and its ancestors'): the folder's face.
            if target != *module && !module.starts_with(&format!("{target}::")) {
                edges
                    .entry(module.clone())
                    .or_default()
                    .entry(target)
                    .or_insert_with(|| format!("{at} {}{via}", import.shown()));
            }
        }
    }
    found.extend(cycles(&edges));
    found
}

/// One line per import cycle among modules (at least one per group of modules that import
/// each other; each cycle once), with the import that makes each step.
fn cycles(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
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
        for next in edges.get(node).into_iter().flat_map(|e| e.keys()) {
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
        .map(|c| {
            let steps: Vec<&str> = (0..c.len())
                .map(|i| edges[&c[i]][&c[(i + 1) % c.len()]].as_str())
                .collect();
            format!(
                "import cycle: {} -> {} ({})",
                c.join(" -> "),
                c[0],
                steps.join("; ")
            )
        })
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

#[test]
fn the_real_tree_is_read_through_super_paths() {
    // The check above means something only if the parser sees the tree's `super::` imports.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), root, &mut files);
    let supers = files
        .iter()
        .filter(|(path, _)| path != "src/lib.rs")
        .flat_map(|(path, text)| {
            let module = place(path).1;
            parse(&module, text).expect("src/ parses").imports
        })
        .filter(|i| i.written.starts_with("super::"))
        .count();
    assert!(supers > 20, "only {supers} `super::` imports read in src/");
}

/// Whether `item` (outside tests) implements a trait named `name`.
fn implements(item: &Item, name: &str) -> bool {
    let Item::Impl(i) = item else {
        return false;
    };
    let named = |path: &syn::Path| path.segments.last().is_some_and(|s| s.ident == name);
    !test_only(&i.attrs) && i.trait_.as_ref().is_some_and(|t| named(&t.0))
}

/// The search folder is one file per part and one per strategy. Every file of it is read by the
/// checks above (placed in the `search` layer, parsed, its `super::` imports resolved), and the
/// registry imports every file that implements `Strategy`: a strategy file without its
/// registry entry is caught here.
#[test]
fn every_search_file_is_read_and_every_strategy_registered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src/search"), root, &mut files);
    assert!(files.len() >= 10, "read src/search/: {} files", files.len());
    let mut strategies = BTreeSet::new();
    let mut registry = None;
    for (path, text) in &files {
        let (layer, module) = place(path);
        assert_eq!(layer, "search", "{path}");
        let parsed = parse(&module, text).unwrap_or_else(|e| panic!("{path}:{e}"));
        assert!(parsed.errors.is_empty(), "{path}: {:?}", parsed.errors);
        let file = syn::parse_file(text).expect("parsed above");
        if file.items.iter().any(|item| implements(item, "Strategy")) {
            strategies.insert(module.clone());
        }
        if module == "search::registry" {
            registry = Some(parsed);
        }
    }
    assert!(strategies.len() >= 5, "strategy files: {strategies:?}");
    let registry = registry.expect("src/search/registry.rs is read");
    let imported: BTreeSet<String> = registry
        .imports
        .iter()
        .map(|i| {
            i.resolved
                .iter()
                .take(2)
                .cloned()
                .collect::<Vec<_>>()
                .join("::")
        })
        .collect();
    let missing: Vec<&String> = strategies.difference(&imported).collect();
    assert!(
        missing.is_empty(),
        "strategies that src/search/registry.rs does not import: {missing:?}"
    );
}

fn fake(path: &str, text: &str) -> (String, String) {
    (path.to_string(), text.to_string())
}

/// The crate paths the file of `module` imports, resolved, in order.
fn imports(module: &str, text: &str) -> Vec<String> {
    let parsed = parse(module, text).expect("the snippet parses");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed.imports.iter().map(Import::absolute).collect()
}

#[test]
fn an_upward_import_is_named_with_its_file_and_line() {
    let files = [
        fake("src/model/shape.rs", "\nuse crate::pipeline::tune;\n"),
        fake("src/pipeline/mod.rs", "pub fn tune() {}\n"),
    ];
    let found = violations(&files);
    assert_eq!(
        found,
        ["src/model/shape.rs:2: `crate::pipeline::tune` imports layer 'pipeline' from the lower layer 'model'"]
    );
}

#[test]
fn super_paths_are_resolved_from_the_module_they_are_in() {
    assert_eq!(
        imports(
            "pipeline::a",
            "use super::b::B;\nuse self::inner::C;\nmod inner {}\n"
        ),
        ["crate::pipeline::b::B", "crate::pipeline::a::inner::C"]
    );
    // A mod.rs is its folder's module: its `super` is the crate root.
    assert_eq!(
        imports("pipeline", "use super::store::Record;\n"),
        ["crate::store::Record"]
    );
    // `super::super::` from an inline module, and a path in an expression.
    let text =
        "mod inner {\n    use super::super::b::B;\n    fn f() { super::super::c::run(); }\n}\n";
    assert_eq!(
        imports("pipeline::a", text),
        ["crate::pipeline::b::B", "crate::pipeline::c::run"]
    );
    // A path through a child module the file declares is the child's.
    assert_eq!(
        imports(
            "pipeline",
            "mod plan;\nuse plan::Plan;\nfn f() { plan::make(); }\n"
        ),
        ["crate::pipeline::plan::Plan", "crate::pipeline::plan::make"]
    );
    // Other crates and local names are not crate paths.
    assert!(imports(
        "pipeline::a",
        "use std::fmt;\nuse ::csv::Writer;\nfn f(x: u8) { x.max(1); Vec::<u8>::new(); }\n"
    )
    .is_empty());
}

#[test]
fn a_super_path_upward_is_a_violation_and_one_above_the_root_an_error() {
    let found = violations(&[fake("src/model/mod.rs", "use super::cli::Cli;\n")]);
    assert_eq!(
        found,
        ["src/model/mod.rs:1: `super::cli::Cli` (= `crate::cli::Cli`) imports layer 'cli' from the lower layer 'model'"]
    );
    let found = violations(&[fake("src/model/shape.rs", "use super::super::super::x;\n")]);
    assert_eq!(
        found,
        ["src/model/shape.rs:1: `super::super::super::x` goes above the crate root"]
    );
}

#[test]
fn nested_groups_yield_every_path() {
    assert_eq!(
        imports(
            "store::run",
            "use crate::{model::{shape::Shape, dtype::{self, DType}}, cli::Cli, error::*};\n"
        ),
        [
            "crate::model::shape::Shape",
            "crate::model::dtype",
            "crate::model::dtype::DType",
            "crate::cli::Cli",
            "crate::error",
        ]
    );
    let files = [fake(
        "src/store/run.rs",
        "use crate::{model::{shape::Shape}, cli::Cli};\n",
    )];
    let found = violations(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("`crate::cli::Cli`"), "{found:?}");
}

#[test]
fn strings_and_comments_hold_no_imports_and_hide_nothing() {
    // A `//` in a string does not end the line's code.
    let text = "fn f() { let _u = \"http://x\"; crate::cli::run(); }\n";
    assert_eq!(imports("model::shape", text), ["crate::cli::run"]);
    // Paths written in strings, raw strings, comments and doc text are not imports.
    let text = r####"//! See [`crate::cli`].
/// Calls `crate::cli::run`.
fn f() {
    let _a = "use crate::cli::Cli; super::x::y";
    let _b = r#"crate::cli::Cli"#; /* crate::cli::Cli */
    // use crate::cli::Cli;
    println!("crate::cli::{}", 1);
}
"####;
    assert!(imports("model::shape", text).is_empty());
    // Paths in macro bodies are code.
    let text = "fn f() { println!(\"{}\", crate::cli::name()); assert!(super::b::ok()); }\n";
    assert_eq!(
        imports("pipeline::a", text),
        ["crate::cli::name", "crate::pipeline::b::ok"]
    );
}

#[test]
fn test_only_items_are_not_read() {
    let text = "use crate::error::Result;\n\n#[cfg(test)]\nmod tests {\n    use crate::cli::Cli;\n}\n#[cfg(all(test, unix))]\nfn helper() { crate::cli::run(); }\nstruct S;\nimpl S {\n    #[cfg(test)]\n    fn probe() { crate::cli::run(); }\n}\n";
    assert!(violations(&[fake("src/model/shape.rs", text)]).is_empty());
    // `not(test)` code ships, so it is read.
    let text = "#[cfg(not(test))]\nfn f() { crate::cli::run(); }\n";
    assert_eq!(imports("model::shape", text), ["crate::cli::run"]);
}

#[test]
fn a_cycle_inside_a_folder_is_reported_with_its_path() {
    let files = [
        fake("src/pipeline/mod.rs", "mod a;\nmod b;\n"),
        fake("src/pipeline/a.rs", "use super::b::B;\npub struct A;\n"),
        fake(
            "src/pipeline/b.rs",
            "pub struct B;\nfn f() { super::a::A; }\n",
        ),
    ];
    assert_eq!(
        violations(&files),
        ["import cycle: pipeline::a -> pipeline::b -> pipeline::a (src/pipeline/a.rs:1 `super::b::B` (= `crate::pipeline::b::B`); src/pipeline/b.rs:2 `super::a::A` (= `crate::pipeline::a::A`))"]
    );
    // A module using its own folder's mod.rs is no cycle.
    let files = [
        fake(
            "src/pipeline/mod.rs",
            "mod a;\npub struct P;\nfn f() { a::run(); }\n",
        ),
        fake("src/pipeline/a.rs", "use super::P;\npub fn run() {}\n"),
    ];
    assert!(violations(&files).is_empty());
}

#[test]
fn a_cycle_through_a_re_export_is_found() {
    // a.rs reaches b.rs through the name mod.rs re-exports, directly and by a glob.
    for reexport in ["pub use b::B;", "pub use self::b::*;"] {
        let files = [
            fake(
                "src/pipeline/mod.rs",
                &format!("mod a;\nmod b;\n{reexport}\n"),
            ),
            fake("src/pipeline/a.rs", "use super::B;\npub struct A;\n"),
            fake("src/pipeline/b.rs", "use super::a::A;\npub struct B;\n"),
        ];
        let found = violations(&files);
        assert_eq!(found.len(), 1, "{reexport}: {found:?}");
        assert!(
            found[0].starts_with("import cycle: pipeline::a -> pipeline::b -> pipeline::a ("),
            "{reexport}: {found:?}"
        );
        assert!(
            found[0].contains("`super::B` (= `crate::pipeline::B`), re-exported from pipeline::b;"),
            "{reexport}: {found:?}"
        );
    }
}

#[test]
fn a_cycle_through_crate_paths_is_found() {
    let files = [
        fake(
            "src/store/run.rs",
            "use crate::store::best::BestRow;\npub struct Record;\n",
        ),
        fake(
            "src/store/best.rs",
            "use crate::store::run::Record;\npub struct BestRow;\n",
        ),
    ];
    let found = violations(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("import cycle: store::best -> store::run -> store::best ("),
        "{found:?}"
    );
}

#[test]
fn a_folder_outside_the_layers_and_a_file_that_does_not_parse_are_reported() {
    let found = violations(&[fake("src/misc/util.rs", "")]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("'misc' is in no layer"), "{found:?}");
    let found = violations(&[fake("src/model/shape.rs", "fn f( {\n")]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/model/shape.rs:"), "{found:?}");
}
