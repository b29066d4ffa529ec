#!/usr/bin/env bash
# Session 16 (issue 9): builds chunk_transpose.cu on the GPU machine and runs it at the odd
# stride 8191^2 and the aligned 8192^2 (f16), logs under $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/ct "$here/chunk_transpose.cu" -lcuda 2>&1 | tee "$out/build.log" || exit 1
for shape in "8191 8191" "8192 8192" "${@:-}"; do
    [ -n "$shape" ] || continue
    /tmp/ct $shape 20 2>&1 | tee -a "$out/chunk.log"
done
