//! The documentation names only what is there: every repository path that README.md and
//! docs/*.md name exists, and every `tune` command shown in their code blocks, and in the
//! examples of `tune --help` and `tune <command> --help`, parses. A tuning command is also
//! checked as far as it can be without a GPU: its op, `--param` values and shapes are
//! accepted (where it names no file that exists only on the user's machine).

use clap::{CommandFactory, Parser};
use cuda_autotune::cli::Cli;
use std::path::{Path, PathBuf};

mod common;
use common::repo;

/// The folders of the repository a documented path may start with.
const TOP: &[&str] = &[
    "src/",
    "tests/",
    "docs/",
    "templates/",
    "examples/",
    "scripts/",
    "deploy/",
    "results/",
];

/// README.md and every docs/*.md, with their text.
fn markdown() -> Vec<(PathBuf, String)> {
    let mut files = vec![repo("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect()
}

/// The lines of the fenced code blocks of `text`, and the rest of the text.
fn split_fences(text: &str) -> (Vec<&str>, String) {
    let (mut code, mut prose) = (Vec::new(), String::new());
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if inside {
            code.push(line);
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    (code, prose)
}

/// The repository paths `text` names, each with where it resolves: link targets (relative to
/// the file's folder) and words of inline code spans and code blocks that start with a
/// folder of [`TOP`] (relative to the repository). Placeholders (`<gpu>`, `*`, `$OUT`) are
/// not paths.
fn paths_named(file: &Path, text: &str) -> Vec<(String, PathBuf)> {
    let (code, prose) = split_fences(text);
    let mut found = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let target = &rest[..rest.find(')').unwrap_or(rest.len())];
        if !target.contains("://") && !target.starts_with('#') {
            let path = target.split('#').next().unwrap_or_default();
            found.push((target.to_string(), file.parent().unwrap().join(path)));
        }
    }
    let spans = prose.split('`').skip(1).step_by(2);
    let words = spans
        .chain(code.iter().copied())
        .flat_map(str::split_whitespace);
    for word in words {
        let word = word.trim_matches(|c: char| ",.;:()[]\"'".contains(c));
        let placeholder = word.contains(['<', '*', '$', '{', '|']) || word.contains("...");
        if TOP.iter().any(|t| word.starts_with(t)) && !placeholder {
            found.push((word.to_string(), repo(word)));
        }
    }
    found
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for (file, text) in markdown() {
        for (named, path) in paths_named(&file, &text) {
            checked += 1;
            if !path.exists() {
                missing.push(format!("{}: {named}", file.display()));
            }
        }
    }
    // The README alone names dozens: a scan that finds few is broken.
    assert!(checked > 40, "only {checked} paths found");
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}

/// The `tune` commands of `lines` (code block lines, or help text), as argument lists: a
/// trailing `\` joins the next line, `# ...` comments are dropped, and `cargo run --release
/// --` and `./target/release/tune` count as `tune`. `tune <command> --help` is a pattern,
/// not a command.
fn commands<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<Vec<String>> {
    let mut joined: Vec<String> = Vec::new();
    let mut open = false;
    for line in lines {
        let line = line.split(" #").next().unwrap_or_default().trim();
        if open {
            let last = joined.last_mut().unwrap();
            last.push(' ');
            last.push_str(line.trim_end_matches('\\'));
        } else {
            joined.push(line.trim_end_matches('\\').to_string());
        }
        open = line.ends_with('\\');
    }
    joined
        .iter()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("tune ")
                .or_else(|| l.strip_prefix("./target/release/tune "))
                .or_else(|| l.strip_prefix("cargo run --release -- "))?;
            if rest.contains("<command>") {
                return None;
            }
            let mut args = vec!["tune".to_string()];
            args.extend(rest.split_whitespace().map(str::to_string));
            Some(args)
        })
        .collect()
}

/// Why `args` does not parse or is not accepted, if it is not.
fn problem(args: &[String]) -> Option<String> {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            return None
        }
        Err(e) => return Some(e.to_string()),
    };
    if cli.command.is_some() {
        return None;
    }
    let opts = match cli.tune.options() {
        Ok(o) => o,
        Err(e) => return Some(e.to_string()),
    };
    // Files of the user's own (`my/kernel.toml`, `shapes.txt`) are not in the repository.
    let here = |p: &Option<PathBuf>| p.as_ref().is_none_or(|p| p.exists());
    if !(here(&opts.spec) && here(&opts.template) && here(&opts.templates))
        || cli.tune.shapes.is_some()
    {
        return None;
    }
    cuda_autotune::pipeline::plan::check_inputs(&opts)
        .and_then(|(op, _)| cuda_autotune::pipeline::plan::shape_list(&opts, &op, None))
        .err()
        .map(|e| e.to_string())
}

#[test]
fn every_command_the_docs_show_parses() {
    let mut shown: Vec<(String, Vec<String>)> = Vec::new();
    for (file, text) in markdown() {
        let (code, _) = split_fences(&text);
        for args in commands(code) {
            shown.push((file.display().to_string(), args));
        }
    }
    let root = Cli::command();
    let helps = std::iter::once(&root)
        .chain(root.get_subcommands())
        .filter_map(|c| Some((c.get_name().to_string(), c.get_after_help()?.to_string())));
    for (name, help) in helps {
        // An example is indented by two spaces; what it does, below it, by six.
        let examples = help.lines().filter(|l| l.starts_with("  tune "));
        for args in commands(examples) {
            let at = if name == "tune" {
                String::new()
            } else {
                format!(" {name}")
            };
            shown.push((format!("tune{at} --help"), args));
        }
    }
    // The README's usage block alone shows a dozen.
    assert!(shown.len() > 40, "only {} commands found", shown.len());
    for sub in ["best", "export", "report", "check", "merge", "params"] {
        assert!(
            shown
                .iter()
                .any(|(_, a)| a.get(1).is_some_and(|s| s == sub)),
            "no `tune {sub}` is shown"
        );
    }
    let wrong: Vec<String> = shown
        .iter()
        .filter_map(|(at, args)| {
            problem(args).map(|why| format!("{at}: {}\n  {why}", args.join(" ")))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The scans find what they are meant to find: a link, a code-span path and a code-block path;
/// a continued command; and a command that does not parse is named.
#[test]
fn the_scans_find_paths_and_commands() {
    let text = "See [spec](spec.md#x) and `src/cli/mod.rs`, not `results/<op>.csv`.\n\
                ```sh\ntune --op sgemm \\\n  --shape 8x8x8   # note\nbash scripts/test.sh\n```\n";
    let named: Vec<String> = paths_named(&repo("docs/x.md"), text)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(named, ["spec.md#x", "src/cli/mod.rs", "scripts/test.sh"]);
    let (code, _) = split_fences(text);
    let found = commands(code);
    assert_eq!(found, [vec!["tune", "--op", "sgemm", "--shape", "8x8x8"]]);
    assert!(problem(&found[0]).is_none());
    let bad: Vec<String> = ["tune", "--op", "sgemm", "--shape", "8x8x8", "--tile", "4"]
        .map(String::from)
        .to_vec();
    assert!(problem(&bad).is_some_and(|why| why.contains("--tile")));
    let bad_param: Vec<String> = ["tune", "--shape", "64x64", "--param", "TILES=4"]
        .map(String::from)
        .to_vec();
    assert!(problem(&bad_param).is_some_and(|why| why.contains("TILES")));
}

/// The automatic compile time limit's floor is one constant; `tune --help` and README say
/// the same number.
#[test]
fn the_compile_limit_floor_is_stated_as_the_code_has_it() {
    use cuda_autotune::isolate::compile_pool::AUTO_LIMIT_FLOOR_S;
    let floor = format!("at least {AUTO_LIMIT_FLOOR_S} s");
    let help = Cli::command().render_long_help().to_string();
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat(&help).contains(&floor),
        "tune --help does not say {floor}"
    );
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    assert!(
        flat(&readme).contains(&floor),
        "README.md does not say {floor}"
    );
}
