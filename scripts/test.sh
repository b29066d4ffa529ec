#!/usr/bin/env bash
# The test command (README, CI): installs NVRTC from PyPI into .nvrtc/ (git-ignored), puts it
# on LD_LIBRARY_PATH so generated kernels are compiled by the real NVRTC, then runs
# formatting, lint and the test suite. A test that cannot run on this machine (a GPU test
# where there is no GPU) prints `SKIPPED <name>: <why>` and is counted as skipped, not passed.
#
#   bash scripts/test.sh         CI: an all-pairs covering set of every default space
#   bash scripts/test.sh --all   also every default variant of every op (over an hour on two
#                                cores): for a release or a template change
set -euo pipefail
cd "$(dirname "$0")/.."
harness=()
case "${1:-}" in
  "") ;;
  --all) harness=(--include-ignored --skip without_the_lock_concurrent_writers_lose_rows) ;;
  *) echo "usage: bash scripts/test.sh [--all]" >&2; exit 2 ;;
esac
libdir=$(scripts/nvrtc-env.sh)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Tests must not read or fill the user's cubin cache.
export CUDA_AUTOTUNE_CACHE="${CUDA_AUTOTUNE_CACHE:-$(mktemp -d)}"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
log=$(mktemp)
status=0
cargo test --all-targets --no-fail-fast -- "${harness[@]}" 2>&1 | tee "$log" || status=$?
# One closing line over every test binary. A test that skips returns early after printing
# "SKIPPED <name>: <why>" (tests/common/mod.rs, to stderr past the harness's capture, so it
# may follow the harness's "test <name> ... " on the same line): it counts as skipped.
skipped=$( { grep -oE 'SKIPPED [A-Za-z0-9_]+: ' "$log" || true; } | wc -l)
awk -v skipped="$skipped" '
  /^test result:/ { for (i = 1; i <= NF; i++) {
      if ($i ~ /^passed;?/) p += $(i-1); if ($i ~ /^failed;?/) f += $(i-1); if ($i ~ /^ignored;?/) s += $(i-1) } }
  END { printf "%d passed, %d failed, %d skipped, %d not run (exhaustive: --all)\n", p - skipped, f, skipped, s }' "$log"
exit "$status"
