#!/usr/bin/env bash
# Issue 9 diagnosis on the GPU machine: Nsight Compute counters of chosen transpose variants
# at 8191x8191 (odd stride) against their 8192x8192 counterparts, f16 and f32, to see where
# the odd stride loses (DRAM bytes beyond the ideal, L2/L1 sectors per request, stalls).
# Binaries from scripts/gpu-build.sh in .gpu/. Output under $OUT (default ./gpu-out).
# Usage: bash scripts/gpu-ncu9.sh [session3|lean|chunk]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT/ncu"
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache} TUNE_EXE=$PWD/.gpu/tune
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,\
lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_memory_throttle_per_issue_active.ratio,launch__occupancy_limit_shared_mem,\
launch__waves_per_multiprocessor,sm__maximum_warps_per_active_cycle_pct,\
smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,\
l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,launch__registers_per_thread
# name kernel shape dtype params...
prof() {
  local name=$1 kernel=$2 shape=$3 dtype=$4; shift 4
  local args=()
  for p in "$@"; do args+=(--param "$p"); done
  echo "== $name: $kernel $shape $dtype $*"
  ncu --clock-control none -k "regex:^${kernel}\$" -c 1 --metrics "$metrics" \
    ./.gpu/tune --op transpose --shape "$shape" --dtype "$dtype" --reps 3 --warmup 1 \
      --strategy exhaustive --out /tmp/ncu-results "${args[@]}" >"$OUT/ncu/$name.txt" 2>&1
  echo "exit $?"
}
base="UNROLL=on CACHE=default PAD=1 VEC=1"
part=${1:-session3}
# shellcheck disable=SC2086
case "$part" in
session3)
prof f16_8191_copyvec4 copy_vec4 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=16 ASPECT=tall BOUNDS=edge TILES_PER_BLOCK=2 RUNS=tile $base
prof f16_8191_t32tall_sector transpose 8191x8191 f16 TILE_DIM=32 BLOCK_ROWS=4 ASPECT=tall BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector $base
prof f16_8191_t64tall_tile transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=16 ASPECT=tall BOUNDS=edge TILES_PER_BLOCK=2 RUNS=tile $base
prof f16_8191_t64wide_sector transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=8 ASPECT=wide BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector $base
prof f16_8192_t64tall transpose 8192x8192 f16 TILE_DIM=64 BLOCK_ROWS=8 ASPECT=tall BOUNDS=specialized TILES_PER_BLOCK=1 RUNS=tile $base
prof f32_8191_t32wide_sector transpose 8191x8191 f32 TILE_DIM=32 BLOCK_ROWS=2 ASPECT=wide BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector $base
prof f32_8191_t64tall_tile transpose 8191x8191 f32 TILE_DIM=64 BLOCK_ROWS=16 ASPECT=tall BOUNDS=edge TILES_PER_BLOCK=1 RUNS=tile $base
prof f32_8192_t64square transpose 8192x8192 f32 TILE_DIM=64 BLOCK_ROWS=8 ASPECT=square BOUNDS=specialized TILES_PER_BLOCK=1 RUNS=tile $base
;;
lean)
# Session 4, after the lean sector path: the new winners and the aligned reference.
prof f16_8191_lean_t32tall_occ64 transpose 8191x8191 f16 TILE_DIM=32 BLOCK_ROWS=4 ASPECT=tall BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=64 $base
prof f16_8191_lean_t64wide transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=wide BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=0 $base
prof f16_8192_lean_t64tall transpose 8192x8192 f16 TILE_DIM=64 BLOCK_ROWS=8 ASPECT=tall BOUNDS=specialized TILES_PER_BLOCK=1 RUNS=tile OCCUPANCY=0 $base
prof f32_8191_lean_t64sq_occ64 transpose 8191x8191 f32 TILE_DIM=64 BLOCK_ROWS=8 ASPECT=square BOUNDS=always TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=64 $base
;;
chunk)
# Session 12: the f16 leaders at 8191^2 with READ=elem and READ=chunk (same tile, and each
# one's best tile).
prof f16_8191_elem_t64sq_occ64 transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=square BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=64 READ=elem $base
prof f16_8191_chunk_t64sq_occ64 transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=square BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=64 READ=chunk $base
prof f16_8191_elem_t64wide_occ64 transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=wide BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=64 READ=elem $base
prof f16_8191_chunk_t64wide_occ64 transpose 8191x8191 f16 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=wide BOUNDS=edge TILES_PER_BLOCK=1 RUNS=sector OCCUPANCY=64 READ=chunk $base
;;
esac
# One line per profile: the metrics in a table.
python3 - "$OUT/ncu" <<'PY'
import os, re, sys
d = sys.argv[1]
short = {"gpu__time_duration.sum": "us", "dram__bytes_read.sum": "dramRd", "dram__bytes_write.sum": "dramWr",
  "lts__t_sectors_srcunit_tex_op_read.sum": "l2RdSec", "lts__t_sectors_srcunit_tex_op_write.sum": "l2WrSec",
  "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": "l2RdMiss", "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum": "l2WrMiss",
  "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "ldReq", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "ldSec",
  "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "stReq", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "stSec"}
for f in sorted(os.listdir(d)):
    txt = open(os.path.join(d, f)).read()
    print("--", f[:-4])
    for line in txt.splitlines():
        m = re.match(r"\s+(\S+)\s+(\S+)?\s+([\d.,]+)\s*$", line)
        if m and ("__" in m.group(1)):
            print("   %-70s %-8s %s" % (m.group(1), m.group(2) or "", m.group(3)))
PY
