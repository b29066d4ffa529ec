//! deploy/: the Kubernetes manifests, the Dockerfile of their image and the Slurm script agree.
//!
//! * Every manifest validates against the Kubernetes API schemas (kubernetes-validate, installed
//!   from PyPI into .k8s-validate/ by scripts/k8s-validate.sh; skipped where PyPI cannot be
//!   reached).
//! * The three Jobs (prebuild, shards, merge) hold the same roles, counts, folders, cache and
//!   tune arguments as each other and as deploy/slurm/tune-array.sh, and their tune commands
//!   parse.
//! * The Dockerfile's build context holds everything the binary is built from, and its image is
//!   the one the manifests and docs name. The image itself cannot be built here (its base
//!   images cannot be pulled on these machines); a `cargo check` of what its build stage
//!   copies is an ignored test (one to two minutes on two cores).

use clap::Parser;
use cuda_autotune::cli::Cli;
use cuda_autotune::model::slice::Shard;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{repo, skipped, text, tmp};

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

// ---------------------------------------------------------------------------------------
// Kubernetes schemas
// ---------------------------------------------------------------------------------------

#[test]
fn every_kubernetes_manifest_validates_against_the_schemas() {
    let name = "every_kubernetes_manifest_validates_against_the_schemas";
    let validate = |files: &[PathBuf]| {
        Command::new("bash")
            .arg(repo("scripts/k8s-validate.sh"))
            .args(files)
            .output()
            .expect("bash runs")
    };
    let out = validate(&[]);
    if out.status.code() == Some(3) {
        skipped(
            name,
            "kubernetes-validate could not be installed from PyPI (no network?)",
        );
        return;
    }
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    let manifests = manifests();
    assert!(
        all.contains(&format!("{} manifest(s) valid", manifests.len())),
        "{all}"
    );
    // The check can fail: a field Kubernetes does not know is refused.
    let t = tmp();
    let bad = t.path().join("bad.yaml");
    let shards = read("deploy/k8s/tune-shards-job.yaml");
    assert!(shards.contains("  completions: "));
    std::fs::write(&bad, shards.replace("  completions: ", "  completion: ")).unwrap();
    let out = validate(&[bad]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("'completion' was unexpected"), "{all}");
}

// ---------------------------------------------------------------------------------------
// The roles agree
// ---------------------------------------------------------------------------------------

/// deploy/k8s/*.yaml, sorted.
fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo("deploy/k8s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// What a test reads of one Job manifest. The manifests are plain block YAML written for
/// people: one key a line, the command a folded (`>-`) block, which is all this reads.
#[derive(Debug)]
struct Job {
    file: String,
    name: String,
    /// `app.kubernetes.io/component` of the Job and of its pod template.
    components: Vec<String>,
    completions: Option<usize>,
    parallelism: Option<usize>,
    env: BTreeMap<String, String>,
    /// The folded shell command, joined into one line.
    script: String,
    images: Vec<String>,
    gpus: Vec<String>,
    claim: String,
}

fn value(line: &str, key: &str) -> Option<String> {
    let rest = line.trim().strip_prefix(key)?.strip_prefix(':')?;
    Some(rest.trim().trim_matches('"').to_string())
}

fn job(file: &str) -> Job {
    let text = read(&format!("deploy/k8s/{file}"));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().starts_with('#'))
        .collect();
    assert!(lines.iter().any(|l| l.trim() == "kind: Job"), "{file}");
    let all = |key: &str| -> Vec<String> { lines.iter().filter_map(|l| value(l, key)).collect() };
    let one = |key: &str| all(key).into_iter().next();
    let mut env = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(name) = value(l, "- name") {
            if let Some(v) = lines.get(i + 1).and_then(|n| value(n, "value")) {
                env.insert(name, v);
            }
        }
    }
    // The folded block after `- >-`: its lines up to the first one indented less.
    let start = lines
        .iter()
        .position(|l| l.trim() == "- >-")
        .unwrap_or_else(|| panic!("{file}: no `- >-` command block"));
    let indent = |l: &str| l.len() - l.trim_start().len();
    let block = indent(lines[start + 1]);
    let script = lines[start + 1..]
        .iter()
        .take_while(|l| indent(l) >= block && !l.trim().is_empty())
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    Job {
        file: file.to_string(),
        name: lines
            .iter()
            .find_map(|l| value(l, "name").filter(|_| l.starts_with("  name")))
            .unwrap_or_default(),
        components: all("app.kubernetes.io/component"),
        completions: one("completions").map(|v| v.parse().unwrap()),
        parallelism: one("parallelism").map(|v| v.parse().unwrap()),
        env,
        script,
        images: all("image"),
        gpus: all("nvidia.com/gpu"),
        claim: one("claimName").unwrap_or_default(),
    }
}

/// `script` with `$VAR` and `"$VAR"` replaced by the Job's values (and the pod index by 0).
fn expand(script: &str, env: &BTreeMap<String, String>) -> String {
    let mut s = script.replace('"', "");
    s = s.replace("$JOB_COMPLETION_INDEX", "0");
    // Longest names first, so $RUN does not eat the start of a longer name.
    let mut names: Vec<&String> = env.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for n in names {
        s = s.replace(&format!("${n}"), &env[n]);
    }
    s
}

/// The tune arguments of a Job's command before `marker` (`exec tune ARGS marker ...`).
fn tune_args<'a>(job: &'a Job, marker: &str) -> &'a str {
    let rest = job.script.strip_prefix("exec tune ").unwrap_or_else(|| {
        panic!(
            "{}: the command is not `exec tune ...`: {}",
            job.file, job.script
        )
    });
    let at = rest
        .find(marker)
        .unwrap_or_else(|| panic!("{}: no {marker} in: {}", job.file, job.script));
    rest[..at].trim()
}

/// Parses `tune ARGS` as tune does before it starts: the options, and `--shard K/N`.
fn parses(args: &str) -> Result<(), String> {
    let argv = std::iter::once("tune").chain(args.split_whitespace());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    cli.tune.options().map_err(|e| e.to_string())?;
    if let Some(shard) = &cli.tune.shard {
        Shard::parse(shard).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn the_kubernetes_jobs_agree_with_each_other_and_the_slurm_script() {
    let files: Vec<String> = manifests()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        [
            "tune-merge-job.yaml",
            "tune-prebuild-job.yaml",
            "tune-shards-job.yaml",
            "tune-shared.yaml"
        ]
    );
    let prebuild = job("tune-prebuild-job.yaml");
    let shards = job("tune-shards-job.yaml");
    let merge = job("tune-merge-job.yaml");
    let shared = read("deploy/k8s/tune-shared.yaml");

    // The roles, by label and name, as the Slurm script names its stages.
    for (j, role) in [
        (&prebuild, "prebuild"),
        (&shards, "shards"),
        (&merge, "merge"),
    ] {
        assert_eq!(j.components, [role, role], "{}", j.file);
        assert_eq!(j.name, format!("tune-{role}"), "{}", j.file);
        assert!(
            read("deploy/slurm/tune-array.sh").contains(&format!("has {role}")),
            "tune-array.sh has no stage {role}"
        );
        // One claim, the one tune-shared.yaml defines.
        assert_eq!(j.claim, "tune-results", "{}", j.file);
        assert!(shared.contains("name: tune-results"));
    }
    // Counts: each Indexed Job runs all its pods at once, as many as its command's K/N says.
    let count = |j: &Job, var: &str| -> usize { j.env[var].parse().unwrap() };
    assert_eq!(
        prebuild.completions,
        Some(count(&prebuild, "PREBUILD_TASKS"))
    );
    assert_eq!(prebuild.parallelism, prebuild.completions);
    assert_eq!(shards.completions, Some(count(&shards, "SHARDS")));
    assert_eq!(shards.parallelism, shards.completions);
    assert_eq!(count(&merge, "SHARDS"), count(&shards, "SHARDS"));
    assert_eq!(merge.completions, None);
    // One run folder, and one cache inside it where tune-array.sh puts it (RUN_DIR/cache).
    let run = &shards.env["RUN"];
    assert_eq!(&prebuild.env["RUN"], run);
    assert_eq!(&merge.env["RUN"], run);
    assert_eq!(prebuild.env["CUDA_AUTOTUNE_CACHE"], format!("{run}/cache"));
    assert_eq!(shards.env["CUDA_AUTOTUNE_CACHE"], format!("{run}/cache"));
    // Only the shards get a GPU.
    assert_eq!(shards.gpus, ["1"]);
    assert!(prebuild.gpus.is_empty() && merge.gpus.is_empty());

    // The commands: the same sweep, in the folders tune-array.sh uses.
    let sweep = tune_args(&shards, "--shard");
    assert_eq!(tune_args(&prebuild, "--compile-only"), sweep);
    assert_eq!(
        prebuild.script,
        format!(
            "exec tune {sweep} --compile-only --arch \"$TUNE_ARCH\" \
             --shard \"$JOB_COMPLETION_INDEX/$PREBUILD_TASKS\" \
             --out \"$RUN/prebuild/shard-$JOB_COMPLETION_INDEX\""
        )
    );
    assert_eq!(
        shards.script,
        format!(
            "exec tune {sweep} --shard \"$JOB_COMPLETION_INDEX/$SHARDS\" \
             --out \"$RUN/shard-$JOB_COMPLETION_INDEX\" --resume"
        )
    );
    assert!(
        merge.script.contains("dirs=\"$dirs $RUN/shard-$k\"")
            && merge
                .script
                .ends_with("exec tune merge $dirs --out \"$RUN/merged\""),
        "{}",
        merge.script
    );
    let slurm = read("deploy/slurm/tune-array.sh");
    for layout in [
        "--compile-only --arch \"$TUNE_ARCH\"",
        "--shard \"$k/$p\" --out \"$run_dir/prebuild/shard-$k\"",
        "--shard \"$k/$n\" --out \"$run_dir/shard-$k\" --resume",
        "dirs+=(\"$run_dir/shard-$k\")",
        "merge \"${dirs[@]}\" --out \"$run_dir/merged\"",
        "CUDA_AUTOTUNE_CACHE:-$run_dir/cache",
    ] {
        assert!(slurm.contains(layout), "tune-array.sh lacks {layout}");
    }
    // And tune accepts both commands (the shapes file aside, which is the ConfigMap's).
    for j in [&prebuild, &shards] {
        let args = expand(&j.script["exec tune ".len()..], &j.env);
        let args = args.replace("--shapes /config/shapes.txt", "--shape 64x64");
        assert_eq!(parses(&args), Ok(()), "{}: tune {args}", j.file);
    }
    assert!(parses("--op transpose --shape 64x64 --shard 0/x").is_err());
    // The ConfigMap's shapes are shapes.
    let shapes: Vec<&str> = shared
        .lines()
        .skip_while(|l| !l.contains("shapes.txt: |"))
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(!shapes.is_empty());
    let list = shapes.join(",");
    assert_eq!(parses(&format!("--op transpose --shape {list}")), Ok(()));
}

// ---------------------------------------------------------------------------------------
// The image
// ---------------------------------------------------------------------------------------

/// The image the Jobs run, the same in every Job.
fn manifest_image() -> String {
    let mut images: Vec<String> = [
        "tune-prebuild-job.yaml",
        "tune-shards-job.yaml",
        "tune-merge-job.yaml",
    ]
    .iter()
    .flat_map(|f| job(f).images)
    .collect();
    images.dedup();
    assert_eq!(
        images.len(),
        1,
        "the Jobs name different images: {images:?}"
    );
    images.remove(0)
}

/// `COPY` sources of the build stage (not `--from`).
fn copy_sources(dockerfile: &str) -> Vec<String> {
    dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words[..words.len() - 1]
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every file under `dir` (recursively).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_the_image_the_manifests_and_docs_name() {
    let dockerfile = read("deploy/docker/Dockerfile");
    let image = manifest_image();
    // The tag is the crate's version.
    let cargo = read("Cargo.toml");
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = "))
        .expect("Cargo.toml's version")
        .trim_matches('"');
    assert!(
        image.ends_with(&format!(":{version}")),
        "{image} is not :{version}"
    );
    // The documented build command tags that image, in the Dockerfile and in the docs.
    let build = format!("docker build -f deploy/docker/Dockerfile -t {image} .");
    assert!(
        dockerfile.contains(&build),
        "the Dockerfile does not say: {build}"
    );
    assert!(
        read("docs/clusters.md").contains(&build),
        "docs/clusters.md does not say: {build}"
    );
    for f in [
        "tune-prebuild-job.yaml",
        "tune-shards-job.yaml",
        "tune-merge-job.yaml",
    ] {
        assert!(
            read(&format!("deploy/k8s/{f}")).contains("deploy/docker/Dockerfile"),
            "{f} does not say which Dockerfile builds its image"
        );
    }

    // The runtime base is the CUDA major version the binary is built for.
    let base = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ARG CUDA_IMAGE="))
        .expect("ARG CUDA_IMAGE=");
    let major = base
        .strip_prefix("nvidia/cuda:")
        .and_then(|t| t.split('.').next())
        .unwrap_or_else(|| panic!("not an nvidia/cuda image: {base}"));
    assert!(
        base.contains("-runtime-"),
        "{base}: a runtime image holds NVRTC and cuBLAS"
    );
    assert!(
        cargo.contains(&format!("\"cuda-{major}000\"")),
        "{base} is CUDA {major}, the cudarc feature in Cargo.toml is not cuda-{major}000"
    );
    let stages: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(stages[0].ends_with(" AS build"), "{stages:?}");
    assert_eq!(stages[1], "FROM ${CUDA_IMAGE}");

    // The binary: built as `tune` (a [[bin]] of Cargo.toml) in the build stage's WORKDIR,
    // copied onto the PATH the Jobs call it by (`exec tune`), and the image's entry point.
    assert!(cargo.contains("[[bin]]\nname = \"tune\""));
    assert!(dockerfile.contains("WORKDIR /src\n"));
    assert!(dockerfile.contains("RUN cargo build --release --locked --bin tune"));
    assert!(dockerfile.contains("COPY --from=build /src/target/release/tune /usr/local/bin/tune\n"));
    assert!(dockerfile.contains("ENTRYPOINT [\"tune\"]"));
    for f in [
        "tune-prebuild-job.yaml",
        "tune-shards-job.yaml",
        "tune-merge-job.yaml",
    ] {
        assert!(job(f).script.contains("exec tune "), "{f}");
    }

    // The build context: .dockerignore starts from nothing, the COPY sources are the files the
    // binary is built from, and each of them exists and passes .dockerignore.
    let sources = copy_sources(&dockerfile);
    assert_eq!(
        sources,
        [
            "Cargo.toml",
            "Cargo.lock",
            "build.rs",
            "src",
            "templates",
            "results/best.csv"
        ]
    );
    let ignore = read(".dockerignore");
    assert!(
        ignore.lines().any(|l| l == "*"),
        ".dockerignore must start from nothing"
    );
    let rules = dockerignore_rules(&ignore);
    for s in &sources {
        assert!(repo(s).exists(), "COPY {s}: not in the repository");
        assert!(passes(&rules, s), "COPY {s}: .dockerignore leaves it out");
    }

    // What the build stage's WORKDIR holds when `cargo build` runs, assembled as Docker
    // would, is a crate that builds: see build_context_is_complete.
    let t = tmp();
    let context = t.path().join("src");
    let copied = assemble_build_context(&dockerfile, &context);
    assert!(copied > 50, "only {copied} files in the build context");
    build_context_is_complete(&context, &t.path().join("build-script"));
}

/// The files the build context may hold: what a checkout has (tracked files and untracked
/// ones git does not ignore), as paths relative to the repository.
fn checkout_files() -> Vec<String> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(repo(""))
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files: {}", text(&out.stderr));
    text(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty() && repo(f).is_file())
        .map(String::from)
        .collect()
}

/// The rules of a .dockerignore, in order: (pattern, whether it keeps what it matches).
fn dockerignore_rules(text: &str) -> Vec<(String, bool)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (pattern, keep) = match l.strip_prefix('!') {
                Some(p) => (p, true),
                None => (l, false),
            };
            assert!(
                !pattern.contains("**") && !pattern.contains(['[', '\\']),
                ".dockerignore: `{l}` uses a pattern this test does not read (only * and ?)"
            );
            (
                pattern
                    .trim_matches('/')
                    .trim_start_matches("./")
                    .to_string(),
                keep,
            )
        })
        .collect()
}

/// Whether `name` matches `pattern` within one path segment (`*` and `?`).
fn segment_matches(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| segment_matches(rest, &name[i..])),
        Some((b'?', rest)) => !name.is_empty() && segment_matches(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && segment_matches(rest, &name[1..]),
    }
}

/// Whether `path` is in the build context: as Docker reads .dockerignore, the last rule that
/// matches the path or a folder above it decides, and a path no rule matches is in.
fn passes(rules: &[(String, bool)], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    let mut keep = true;
    for (pattern, keeps) in rules {
        let parts: Vec<&str> = pattern.split('/').collect();
        let matches = parts.len() <= segments.len()
            && parts
                .iter()
                .zip(&segments)
                .all(|(p, s)| segment_matches(p.as_bytes(), s.as_bytes()));
        if matches {
            keep = *keeps;
        }
    }
    keep
}

/// Lays out in `to` what the build stage's COPY lines copy (into its WORKDIR) from the
/// build context, the checkout's files that .dockerignore lets through. Returns the number
/// of files copied.
fn assemble_build_context(dockerfile: &str, to: &Path) -> usize {
    let rules = dockerignore_rules(&read(".dockerignore"));
    let context: Vec<String> = checkout_files()
        .into_iter()
        .filter(|f| passes(&rules, f))
        .collect();
    let build_stage = dockerfile.split("\nFROM ").nth(1).expect("a build stage");
    let mut copied = 0;
    for line in build_stage.lines().filter_map(|l| l.strip_prefix("COPY ")) {
        assert!(
            !line.starts_with("--"),
            "COPY {line}: an option this test does not read"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        let (dest, srcs) = words.split_last().expect("COPY SRC... DEST");
        // Several sources, or a destination ending in `/` (or `.`), copy into a folder.
        let into_folder = srcs.len() > 1 || dest.ends_with('/') || dest.ends_with('.');
        let dest = dest.trim_start_matches("./").trim_end_matches('/');
        let dest = to.join(if dest == "." { "" } else { dest });
        for src in srcs {
            assert!(
                !src.contains(['*', '?', '[']),
                "COPY {src}: a wildcard this test does not read"
            );
            let src = src.trim_start_matches("./").trim_end_matches('/');
            let mut found = 0;
            for f in &context {
                // A file source is copied itself, a folder source its contents.
                let target = if f == src {
                    if into_folder {
                        dest.join(Path::new(f).file_name().unwrap())
                    } else {
                        dest.clone()
                    }
                } else if let Some(rest) = f.strip_prefix(&format!("{src}/")) {
                    dest.join(rest)
                } else {
                    continue;
                };
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::copy(repo(f), &target).unwrap();
                found += 1;
            }
            assert!(
                found > 0,
                "COPY {src}: nothing of it is in the build context"
            );
            copied += found;
        }
    }
    copied
}

/// The targets of the package at `dir` that `cargo build --bin tune` compiles (the library,
/// the binary, the build script), as (kind, name, source relative to `dir`), from
/// `cargo metadata`, which reads Cargo.toml's paths and cargo's own discovery (build.rs).
fn build_targets(dir: &Path) -> Vec<(String, String, String)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(dir)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata in {}:\n{}",
        dir.display(),
        text(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = dir.canonicalize().unwrap();
    let mut targets = Vec::new();
    for t in meta["packages"][0]["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        for kind in t["kind"].as_array().unwrap() {
            let kind = kind.as_str().unwrap();
            if matches!(kind, "lib" | "custom-build") || (kind == "bin" && name == "tune") {
                let src = Path::new(t["src_path"].as_str().unwrap());
                let src = src.strip_prefix(&root).unwrap_or(src);
                targets.push((
                    kind.to_string(),
                    name.to_string(),
                    src.to_string_lossy().into_owned(),
                ));
            }
        }
    }
    targets.sort();
    targets
}

/// The path of every `MACRO!("literal")` in `code` (`include_str!("x")` gives `x`).
fn literal_args(code: &str, mac: &str) -> Vec<String> {
    code.split(&format!("{mac}!(\""))
        .skip(1)
        .map(|part| part[..part.find('"').unwrap()].to_string())
        .collect()
}

/// The build context laid out in `context` is a crate whose binary builds, judged without
/// building it (a `cargo check` of it takes one to two minutes on two cores; the ignored test
/// below runs one): every target the build compiles is there as in the repository, every file
/// the sources include is in the context, and the build script, compiled and run there (in
/// `scratch`), writes every file of OUT_DIR that the sources include, including only files
/// of the context. Last, cargo resolves the context alone with the committed lock file.
fn build_context_is_complete(context: &Path, scratch: &Path) {
    // The targets: a build script cargo finds in the repository (build.rs) and not in the
    // context would silently not run there, and OUT_DIR would not be set.
    let targets = build_targets(&repo(""));
    assert!(
        targets.iter().any(|(k, _, _)| k == "custom-build"),
        "{targets:?}"
    );
    assert_eq!(
        build_targets(context),
        targets,
        "the Docker build context lacks a target the binary is built from (kind, name, source)"
    );

    // What the sources include.
    let mut rs_files = files_under(&context.join("src"));
    rs_files.retain(|f| f.extension().is_some_and(|x| x == "rs"));
    let mut included = 0;
    let mut from_out_dir = Vec::new();
    for rs in &rs_files {
        let code = std::fs::read_to_string(rs).unwrap();
        let shown = rs.strip_prefix(context).unwrap().display().to_string();
        if code.contains("env!(\"OUT_DIR\")") {
            assert!(
                targets.iter().any(|(k, _, _)| k == "custom-build"),
                "{shown} reads env!(\"OUT_DIR\"), which only a build script sets"
            );
            for part in code.split("env!(\"OUT_DIR\"), \"/").skip(1) {
                from_out_dir.push(part[..part.find('"').unwrap()].to_string());
            }
        }
        for mac in ["include_str", "include_bytes", "include"] {
            for rel in literal_args(&code, mac) {
                let target = rs.parent().unwrap().join(&rel);
                assert!(
                    target.is_file(),
                    "{shown} includes {rel}, which is not in the Docker build context"
                );
                included += 1;
            }
        }
    }
    assert!(
        included >= 8,
        "only {included} include_str!/include_bytes! found"
    );
    assert!(!from_out_dir.is_empty(), "no include of OUT_DIR found");

    // The build script, run in the context as cargo runs it (CARGO_MANIFEST_DIR, OUT_DIR).
    let (_, _, script) = targets
        .iter()
        .find(|(k, _, _)| k == "custom-build")
        .unwrap();
    let out_dir = scratch.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = scratch.join("build-script");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let edition = read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("edition = "))
        .expect("Cargo.toml's edition")
        .trim_matches('"')
        .to_string();
    let out = Command::new(rustc)
        .arg(context.join(script))
        .args(["--edition", &edition, "--crate-type", "bin", "-o"])
        .arg(&exe)
        .output()
        .expect("rustc runs");
    assert!(
        out.status.success(),
        "rustc {script}:\n{}",
        text(&out.stderr)
    );
    let out = Command::new(&exe)
        .env("CARGO_MANIFEST_DIR", context)
        .env("OUT_DIR", &out_dir)
        .output()
        .expect("the build script runs");
    assert!(
        out.status.success(),
        "{script} in the Docker build context:\n{}",
        text(&out.stderr)
    );
    for name in &from_out_dir {
        let written = std::fs::read_to_string(out_dir.join(name))
            .unwrap_or_else(|e| panic!("{script} did not write {name}, which src/ includes: {e}"));
        let mut files = literal_args(&written, "include_str");
        files.extend(literal_args(&written, "include_bytes"));
        assert!(!files.is_empty(), "{name}: {written}");
        for f in files {
            let f = Path::new(&f);
            assert!(
                f.is_file() && f.starts_with(context),
                "{name} includes {}, which is not in the Docker build context",
                f.display()
            );
        }
    }

    // The context alone is a crate cargo resolves with the committed lock file, for the
    // image's platform (x86-64 Linux): crates the lock file holds for other platforms are
    // never downloaded by a build here, so an offline resolve of every platform would fail
    // on a machine that has only built the tool.
    let cargo_bin = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo_bin)
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--format-version",
            "1",
            "--filter-platform",
            "x86_64-unknown-linux-gnu",
        ])
        .current_dir(context)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata in the build context:\n{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("\"name\":\"tune\""));
}

/// The Docker build stage's `cargo build`, as a `cargo check` of the assembled build context
/// (offline, with the committed lock file). It reuses this test run's target folder for the
/// dependencies, and still takes one to two minutes on two cores where they were never
/// checked there, so it runs only with --include-ignored (`scripts/test.sh --all`); the test
/// above checks the same context without compiling it.
#[test]
#[ignore = "a cargo check of the Docker build context: 1 to 2 minutes on two cores"]
fn the_docker_build_context_compiles() {
    let t = tmp();
    let context = t.path().join("src");
    assemble_build_context(&read("deploy/docker/Dockerfile"), &context);
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target folder")
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut check = Command::new(cargo);
    check
        .args(["check", "--offline", "--locked", "--bin", "tune"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&context);
    // What cargo set for this test's own crate, OUT_DIR above all: inherited, it would stand
    // in for the build script's in env!("OUT_DIR") even where the context has none.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k == "OUT_DIR"
            || [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_BIN_",
                "CARGO_CRATE_",
            ]
            .iter()
            .any(|p| k.starts_with(p))
        {
            check.env_remove(k.as_ref());
        }
    }
    let t0 = std::time::Instant::now();
    let out = check.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo check in the Docker build context:\n{}",
        text(&out.stderr)
    );
    eprintln!(
        "cargo check of the Docker build context: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
