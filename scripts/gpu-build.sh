#!/usr/bin/env bash
# Builds the release binaries that scripts/gpu-batch.sh runs on the GPU machine, into .gpu/
# (git-ignored; pass `carry: [".gpu"]` to the device tool).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
cargo build --release --bin tune
mkdir -p .gpu
cp "$target"/release/tune .gpu/tune
for t in gpu faults; do
  bin=$(cargo test --release --test $t --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["kind"]==["test"]]')
  cp "$bin" .gpu/$t-tests
done
cargo build --release --example tuned_transpose
cp "$target"/release/examples/tuned_transpose .gpu/tuned_transpose
# Stripped: the device tool carries at most 64 MiB with the working tree (results/ is ~46 MiB).
command -v strip >/dev/null && strip .gpu/tune .gpu/*-tests .gpu/tuned_transpose
ls -la .gpu
