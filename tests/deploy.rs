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
//!   images cannot be pulled on these machines).

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

/// `COPY` sources of the build stage (not `--from`), and the `!` entries of .dockerignore.
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

    // The build context: every COPY source exists and passes .dockerignore (everything
    // ignored, then `!` entries), and every file the sources build into the binary
    // (include_str!, include_bytes!) is inside a COPY source.
    let sources = copy_sources(&dockerfile);
    assert_eq!(
        sources,
        [
            "Cargo.toml",
            "Cargo.lock",
            "src",
            "templates",
            "results/best.csv"
        ]
    );
    let ignore = read(".dockerignore");
    let kept: Vec<&str> = ignore
        .lines()
        .filter_map(|l| l.strip_prefix('!'))
        .map(|l| l.trim_end_matches('/'))
        .collect();
    assert!(
        ignore.lines().any(|l| l == "*"),
        ".dockerignore must start from nothing"
    );
    for s in &sources {
        assert!(repo(s).exists(), "COPY {s}: not in the repository");
        assert!(
            kept.iter()
                .any(|k| s == k || s.starts_with(&format!("{k}/"))),
            "COPY {s}: .dockerignore leaves it out"
        );
    }
    let inside = |p: &Path| sources.iter().any(|s| p.starts_with(repo(s)));
    let mut included = 0;
    for rs in files_under(&repo("src")) {
        let code = std::fs::read_to_string(&rs).unwrap();
        for mac in ["include_str!(\"", "include_bytes!(\""] {
            for part in code.split(mac).skip(1) {
                let rel = &part[..part.find('"').unwrap()];
                let target = rs.parent().unwrap().join(rel);
                let target = target
                    .canonicalize()
                    .unwrap_or_else(|e| panic!("{}: {rel}: {e}", rs.display()));
                assert!(
                    inside(&target),
                    "{} builds in {}, which no COPY puts in the build context",
                    rs.display(),
                    target.display()
                );
                included += 1;
            }
        }
    }
    assert!(
        included >= 8,
        "only {included} include_str!/include_bytes! found"
    );

    // That context alone is a crate cargo resolves with the committed lock file, for the
    // image's platform (x86-64 Linux): crates the lock file holds for other platforms are
    // never downloaded by a build here, so an offline resolve of every platform would fail
    // on a machine that has only built the tool.
    let t = tmp();
    for s in &sources {
        let to = t.path().join(s);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let from = repo(s);
        if from.is_dir() {
            for f in files_under(&from) {
                let dest = to.join(f.strip_prefix(&from).unwrap());
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::copy(&f, dest).unwrap();
            }
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
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
        .current_dir(t.path())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata in the build context:\n{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("\"name\":\"tune\""));
}
