#!/usr/bin/env bash
# The test command (README, CI): installs NVRTC from PyPI into .nvrtc/ (git-ignored), puts it
# on LD_LIBRARY_PATH so every generated kernel is compiled by the real NVRTC, then runs
# formatting, lint and the whole test suite. GPU tests print SKIPPED where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
libdir=$(scripts/nvrtc-env.sh)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Tests must not read or fill the user's cubin cache.
export CUDA_AUTOTUNE_CACHE="${CUDA_AUTOTUNE_CACHE:-$(mktemp -d)}"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
log=$(mktemp)
cargo test --all-targets 2>&1 | tee "$log"
# One closing line over every test binary (the last binary alone may hold no tests).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?/) p += $(i-1); if ($i ~ /^failed;?/) f += $(i-1); if ($i ~ /^ignored;?/) s += $(i-1) } }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$log"
