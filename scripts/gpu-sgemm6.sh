#!/usr/bin/env bash
# Issue 10, session 6: an A/B of sgemm templates in one call, the same configurations at four
# shapes, alternating the templates twice, then (without `last`) Nsight Compute counters of one
# configuration at 1000^3 in `old` and `new`. Each template set is a folder for --templates (a
# copy of templates/ with its sgemm.cu.tera and sgemm.toml swapped in), carried in .gpu/:
#   .gpu/old-templates   sgemm.* from commit 6fedbb9^ (= templates/ again since session 6)
#   templates            as the run's checkout has them (session 6 ran it at 3ae16dc: session
#                        5's partial-K-slice-first template, 6fedbb9)
#   .gpu/last-templates  `last` only: results/session6/sgemm_kslice_last_experiment.cu.tera
#                        with 6fedbb9's sgemm.toml
# Results: results/session6/h100_sgemm_ab_old_new*.log. Logs go to $OUT (default ./gpu-out).
# Usage: bash scripts/gpu-sgemm6.sh [last]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT/ncu"
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
log="$OUT/sgemm6.log"
. "$(dirname "$0")/gpu-run.sh"
w1000=(--param BM=64 --param BN=64 --param BK=32 --param TM=8 --param TN=4 --param WARP_N=16 --param VEC=4
  --param PAD=0 --param STAGES=2,3 --param LOAD=async --param BOUNDS=specialized,edge)
w1023=(--param BM=64,128 --param BN=32 --param BK=16 --param TM=8 --param TN=4 --param WARP_N=8 --param VEC=1
  --param PAD=4 --param STAGES=2,4 --param LOAD=async --param BOUNDS=specialized,edge)
w3000=(--param BM=64 --param BN=128 --param BK=16,32 --param TM=8 --param TN=8 --param WARP_N=16 --param VEC=4
  --param PAD=0 --param STAGES=2,3 --param LOAD=async --param BOUNDS=specialized)
# `last`: the partial K slice kept last (as before session 5) but checked only when it is
# issued, so interior blocks copy unchecked like session 5's; needs .gpu/last-templates.
tpls=(old new); [ "${1:-}" = last ] && tpls=(old new last)
if [ "${1:-}" = last ]; then
  # Every load path and bounds mode verified at small shapes with a partial K slice (K < BK too).
  for shape in 97x65x47 33x17x5 1x1x1 130x66x100; do
    RESULTS=/tmp/last-small run --op sgemm --templates .gpu/last-templates --strategy exhaustive --shape $shape \
      --param BM=32,64 --param BN=64 --param BK=16,32 --param TM=8 --param TN=4 --param WARP_N=16 --param VEC=1,4 \
      --param PAD=0 --param STAGES=1,2,3 --param LOAD=regs,async --param BOUNDS=none,always,specialized,edge --reps 3 \
      | grep -E "^Best|verified configurations|failed"
  done
fi
for round in 1 2; do
  for tpl in "${tpls[@]}"; do
    dir=templates; [ $tpl = old ] && dir=.gpu/old-templates; [ $tpl = last ] && dir=.gpu/last-templates
    RESULTS=$OUT/ab-$tpl-$round run --op sgemm --templates $dir --strategy exhaustive --shape 1000x1000x1000 "${w1000[@]}"
    RESULTS=$OUT/ab-$tpl-$round run --op sgemm --templates $dir --strategy exhaustive --shape 1023x1025x1027 "${w1023[@]}"
    RESULTS=$OUT/ab-$tpl-$round run --op sgemm --templates $dir --strategy exhaustive --shape 3000x2000x1500 "${w3000[@]}"
    RESULTS=$OUT/ab-$tpl-$round run --op sgemm --templates $dir --strategy exhaustive --shape 1024x1024x1024 "${w1000[@]}"
  done
done
metrics=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,\
lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,\
launch__occupancy_limit_shared_mem,launch__waves_per_multiprocessor,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__cycles_active.avg
[ "${1:-}" = last ] && exit 0
for tpl in old new; do
  dir=templates; [ $tpl = old ] && dir=.gpu/old-templates
  for b in specialized edge; do
    echo "== ncu $tpl $b" | tee -a "$log"
    ncu --clock-control none -k "regex:^sgemm\$" -s 3 -c 1 --metrics "$metrics" \
      ./.gpu/tune --op sgemm --templates $dir --shape 1000x1000x1000 --reps 3 --warmup 1 --strategy exhaustive \
      --out /tmp/ncu-results "${w1000[@]}" --param STAGES=2 --param BOUNDS=$b >"$OUT/ncu/$tpl-$b.txt" 2>&1
    echo "exit $?" | tee -a "$log"
  done
done
