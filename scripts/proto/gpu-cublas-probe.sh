#!/usr/bin/env bash
# Session 16 (issue 10): cuBLAS's kernel choice and time at the sgemm shapes of the issue, with
# Nsight Compute's name, grid, block, registers and instruction count of each kernel it runs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o /tmp/probe "$here/cublas_probe.cu" -lcublas 2>&1 | tee "$out/probe_build.log"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for s in "999 1001 1003" "1000 1000 1000" "1000 1001 1000" "1000 1000 1003" "1023 1025 1027" "4096 4096 4096"; do
  /tmp/probe $s 30 | tee -a "$out/probe.log"
  if [ -n "$ncu" ]; then
    $ncu --clock-control none --launch-skip 2 --launch-count 1 --metrics launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic,smsp__inst_executed.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active /tmp/probe $s 3 2>&1 \
      | grep -vE "^==PROF==|^cublasSgemm" | tee -a "$out/probe_ncu.log" | grep -E "^\s+[a-zA-Z_0-9]+.*\(|launch__|gpu__time|inst_exec"
  fi
done
