#!/usr/bin/env bash
# Issue 10, session 8: what limits the large-shape sgemm kernels, and 16-wide thread tiles.
#   probe: 1. Nsight Compute sections (scheduler, warp states, shared-memory wavefronts) of the
#             4096^3 winner (BM=BN=64, 8x8 a thread), a TN=16 kernel and cuBLAS's kernel;
#          2. exhaustive sweeps at 4096^3, 2048^3 and 3000x2000x1500 of the session-4 winners'
#             tiles (TN=8) and of TN=16 tiles (8x16 a thread: 6 LDS.128 per 128 FFMA instead
#             of 8, like cuBLAS's 16x8; TM=16 in the cp.async path would need 64 registers of
#             A fragments, so TN is the side to widen), one after the other, same roof.
# Results: results/session8/. Logs go to $OUT (default ./gpu-out); everything is tarred into
# $OUT/session8-<mode>.tar.gz (the device tool returns at most 8 files, two folders deep).
# Usage: bash scripts/gpu-session8.sh [probe|order|sweep|wide|final]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
what=${1:-probe}
log="$OUT/session8-$what.log"
. "$(dirname "$0")/gpu-run.sh"
common=(--param VEC=4 --param LOAD=async --param TM=8 --param GROUP_M=8 --param OCCUPANCY=0)
tn8=(--param BM=32,64 --param BN=64,128 --param BK=32 --param TN=8 --param WARP_N=8,16 --param PAD=0
  --param STAGES=2)
tn16=(--param BM=32,64,128 --param BN=64,128,256 --param BK=8,16,32 --param TN=16 --param WARP_N=4,8
  --param PAD=0,4 --param STAGES=2,3)
sections=(--section SpeedOfLight --section SchedulerStats --section WarpStateStats
  --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats)
stalls=smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__inst_executed.sum
if [ "$what" = probe ]; then
  mkdir -p "$OUT/ncu"
  one() { # name kernel-regex tune-args...
    local name=$1 kre=$2; shift 2
    timeout 90 ncu --clock-control none -k "regex:$kre" -c 1 "${sections[@]}" --metrics "$stalls" \
      ./.gpu/tune --op sgemm --shape 4096x4096x4096 --reps 3 --warmup 1 --strategy exhaustive \
      --out /tmp/ncu-results "${common[@]}" --param PAD=0 --param BOUNDS=specialized "$@" >"$OUT/ncu/$name.txt" 2>&1
    echo "ncu $name: exit $?" | tee -a "$log"
  }
  one w64x64_tn8 '^sgemm$' --param BM=64 --param BN=64 --param BK=32 --param TN=8 --param WARP_N=8 --param STAGES=2
  one w128x128_tn16 '^sgemm$' --param BM=128 --param BN=128 --param BK=16 --param TN=16 --param WARP_N=8 --param STAGES=2
  one cublas '^sm' --param BM=64 --param BN=64 --param BK=32 --param TN=8 --param WARP_N=8 --param STAGES=2
  for shape in 4096x4096x4096 2048x2048x2048 3000x2000x1500; do
    RESULTS=$OUT/tn8 run --op sgemm --strategy exhaustive --shape $shape "${common[@]}" "${tn8[@]}" --param BOUNDS=specialized,edge
    RESULTS=$OUT/tn16 run --op sgemm --strategy exhaustive --shape $shape "${common[@]}" "${tn16[@]}" --param BOUNDS=specialized,edge
  done
fi
if [ "$what" = order ]; then
  # The order of the FFMAs over a thread tile in the cp.async compute step, five template
  # variants (.gpu/tv/<name>, copies of templates/ differing only there), the same
  # configurations, alternating twice; then Nsight Compute stall counters of two of them.
  w4096=(--param BM=32,64 --param BN=64,128 --param BK=32 --param TN=8 --param WARP_N=8,16 --param PAD=0 --param STAGES=2)
  w3000=(--param BM=64 --param BN=128 --param BK=32 --param TN=8 --param WARP_N=16 --param PAD=0 --param STAGES=2)
  w1024=(--param BM=32 --param BN=64 --param BK=32 --param TN=4 --param WARP_N=16 --param PAD=0 --param STAGES=3)
  for round in 1 2; do
    for v in base col snake colsnake snakek; do
      R=$OUT/order-$v-$round
      RESULTS=$R run --op sgemm --templates .gpu/tv/$v --strategy exhaustive --shape 4096x4096x4096 "${common[@]}" "${w4096[@]}" --param BOUNDS=specialized
      RESULTS=$R run --op sgemm --templates .gpu/tv/$v --strategy exhaustive --shape 2048x2048x2048 "${common[@]}" "${w4096[@]}" --param BOUNDS=specialized
      RESULTS=$R run --op sgemm --templates .gpu/tv/$v --strategy exhaustive --shape 3000x2000x1500 "${common[@]}" "${w3000[@]}" --param BOUNDS=specialized
      RESULTS=$R run --op sgemm --templates .gpu/tv/$v --strategy exhaustive --shape 1024x1024x1024 "${common[@]}" "${w1024[@]}" --param BOUNDS=specialized
    done
  done
  mkdir -p "$OUT/ncu"
  for v in base colsnake; do
    timeout 60 ncu --clock-control none -k "regex:^sgemm\$" -c 1 --metrics "$stalls" \
      ./.gpu/tune --op sgemm --templates .gpu/tv/$v --shape 4096x4096x4096 --reps 3 --warmup 1 --strategy exhaustive \
      --out /tmp/ncu-results "${common[@]}" --param PAD=0 --param BOUNDS=specialized --param BM=64 --param BN=64 \
      --param BK=32 --param TN=8 --param WARP_N=8 --param STAGES=2 >"$OUT/ncu/order-$v.txt" 2>&1
  done
  # One line per run: template, shape, the fastest configuration's % of cuBLAS.
  python3 - "$OUT" <<'PY'
import csv,glob,gzip,os,sys
rows={}
for f in sorted(glob.glob(sys.argv[1]+"/order-*/sgemm_*.csv")):
    v=os.path.basename(os.path.dirname(f)).split("-")[1]
    for r in csv.DictReader(open(f)):
        if r["kind"]!="variant" or r["status"]!="ok": continue
        key=(r["shape"], r["BM"]+"x"+r["BN"]+"w"+r["WARP_N"], v)
        rows.setdefault(key,[]).append(f'{r["median_ms"][:7]} ms {100*float(r["frac_of_roof"]):.1f}%')
for k in sorted(rows): print(*k, " | ".join(rows[k]))
PY
fi
if [ "$what" = sweep ]; then
  # With ORDER in the template: a focused exhaustive sweep at 4096^3 (snake and snakek over the
  # tiles that won before), an A/B of snakek against colsnakek (.gpu/tv/colsnakek: column by
  # column, rows alternating, every other step reversed), then the default search at 4096^3
  # and 2048^3.
  RESULTS=$OUT/focused run --op sgemm --strategy exhaustive --shape 4096x4096x4096 "${common[@]}" --param ORDER=snake,snakek \
    --param BM=32,64,128 --param BN=64,128 --param BK=16,32 --param TN=8 --param WARP_N=8,16 --param PAD=0 \
    --param STAGES=2,3 --param BOUNDS=specialized
  w4096=(--param BM=32,64 --param BN=64,128 --param BK=32 --param TN=8 --param WARP_N=8,16 --param PAD=0 --param STAGES=2)
  for round in 1 2; do
    for v in snakek colsnakek; do
      for shape in 4096x4096x4096 2048x2048x2048; do
        RESULTS=$OUT/order-$v-$round run --op sgemm --templates .gpu/tv/$v --strategy exhaustive --shape $shape \
          "${common[@]}" "${w4096[@]}" --param BOUNDS=specialized
      done
    done
  done
  for shape in 4096x4096x4096 2048x2048x2048; do
    RESULTS=$OUT/default run --op sgemm --shape $shape
  done
fi
if [ "$what" = wide ]; then
  # 4096^3 around the sweep's winners (BM=64, 168 registers at BK=16: 6 blocks an SM), more
  # warp shapes and deeper rings; then the default search at four more shapes of the table.
  RESULTS=$OUT/wide run --op sgemm --strategy exhaustive --shape 4096x4096x4096 "${common[@]}" --param ORDER=snakek \
    --param BM=64 --param BN=64,128 --param BK=8,16 --param TN=8 --param WARP_N=4,8,16 --param PAD=0 \
    --param STAGES=2,3,4 --param BOUNDS=specialized
  for shape in 1024x1024x1024 1000x1000x1000 3000x2000x1500 999x1001x1003; do
    [ $SECONDS -lt 480 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
fi
if [ "$what" = final ]; then
  # The GPU tests that run sgemm kernels (now ORDER=snakek by default), the main job, the
  # default search at the two odd shapes left, and GROUP_M at 4096^3 around its winners.
  TUNE_EXE=$PWD/.gpu/tune timeout 300 ./.gpu/gpu-tests --test-threads 1 sgemm wrong_results matmul_variants 2>&1 \
    | tee "$OUT/gpu-tests-final.log" | grep -E "^test |test result|panicked"
  RESULTS=$OUT/main run --op transpose --shape 1000x1000
  for shape in 1023x1025x1027 2047x2049x2051; do
    [ $SECONDS -lt 420 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
  [ $SECONDS -lt 520 ] && RESULTS=$OUT/groupm run --op sgemm --strategy exhaustive --shape 4096x4096x4096 --param VEC=4 \
    --param LOAD=async --param TM=8 --param OCCUPANCY=0 --param GROUP_M=1,4,8,16 --param BM=64 --param BN=64,128 --param BK=16 --param TN=8 --param WARP_N=8 --param PAD=0 \
    --param STAGES=2,3 --param BOUNDS=specialized
fi
if [ "$what" = check ]; then
  # The sgemm search test (cut by final's time limit), then ORDER row/snake/snakek on the
  # session-7 winners of the two REPACK shapes whose default search fell back this session.
  TUNE_EXE=$PWD/.gpu/tune timeout 400 ./.gpu/gpu-tests --test-threads 1 sgemm_searches 2>&1 \
    | tee "$OUT/gpu-tests-check.log" | grep -E "^test |test result|panicked"
  rep=(--strategy exhaustive --param VEC=4 --param LOAD=async --param TM=8 --param OCCUPANCY=0 --param GROUP_M=8
    --param REPACK=1 --param ORDER=row,snake,snakek)
  RESULTS=$OUT/check run --op sgemm --shape 999x1001x1003 "${rep[@]}" --param BM=64 --param BN=64 --param BK=32 \
    --param TN=4 --param WARP_N=16 --param PAD=0 --param STAGES=2 --param BOUNDS=edge
  RESULTS=$OUT/check run --op sgemm --shape 2047x2049x2051 "${rep[@]}" --param BM=128 --param BN=64 --param BK=16 \
    --param TN=8 --param WARP_N=8 --param PAD=0 --param STAGES=3 --param BOUNDS=specialized
  RESULTS=$OUT/check run --op sgemm --shape 1023x1025x1027 "${rep[@]}" --param BM=64,128 --param BN=32 --param BK=16,32 \
    --param TN=4 --param WARP_N=8 --param PAD=0,4 --param STAGES=2,3 --param BOUNDS=specialized,edge
fi
if [ "$what" = store ]; then
  # C stored with scalar stores (.gpu/tv/sv1: STORE_VEC forced to 1) against float4 stores
  # (templates/): float4 stores make ptxas keep each thread's accumulators in aligned quads,
  # which puts acc[i][j] in the same register bank as b[j] (also loaded as a quad), so an FFMA
  # that reuses a reads two operands from one bank. Same configurations, alternating twice.
  o=(--param ORDER=row,snakek)
  w4096=(--param BM=64 --param BN=64,128 --param BK=16,32 --param TN=8 --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3)
  w3000=(--param BM=64 --param BN=128 --param BK=32 --param TN=8 --param WARP_N=16 --param PAD=0 --param STAGES=2)
  w2047=(--param BM=128 --param BN=64 --param BK=16 --param TN=8 --param WARP_N=8 --param PAD=0 --param STAGES=3 --param REPACK=1)
  for round in 1 2; do
    for v in base sv1; do
      dir=templates; [ $v = sv1 ] && dir=.gpu/tv/sv1
      R=$OUT/store-$v-$round
      RESULTS=$R run --op sgemm --templates $dir --strategy exhaustive --shape 4096x4096x4096 "${common[@]}" "${o[@]}" "${w4096[@]}" --param BOUNDS=specialized
      RESULTS=$R run --op sgemm --templates $dir --strategy exhaustive --shape 3000x2000x1500 "${common[@]}" "${o[@]}" "${w3000[@]}" --param BOUNDS=specialized
      RESULTS=$R run --op sgemm --templates $dir --strategy exhaustive --shape 2047x2049x2051 "${common[@]}" "${o[@]}" "${w2047[@]}" --param BOUNDS=specialized
    done
  done
  mkdir -p "$OUT/ncu"
  for v in base sv1; do
    dir=templates; [ $v = sv1 ] && dir=.gpu/tv/sv1
    timeout 60 ncu --clock-control none -k "regex:^sgemm\$" -c 1 --metrics "$stalls" \
      ./.gpu/tune --op sgemm --templates $dir --shape 4096x4096x4096 --reps 3 --warmup 1 --strategy exhaustive \
      --out /tmp/ncu-results "${common[@]}" --param PAD=0 --param BOUNDS=specialized --param BM=64 --param BN=64 \
      --param BK=16 --param TN=8 --param WARP_N=8 --param STAGES=3 --param ORDER=snakek >"$OUT/ncu/store-$v.txt" 2>&1
  done
  python3 - "$OUT" <<'PY'
import csv,glob,os,sys
rows={}
for f in sorted(glob.glob(sys.argv[1]+"/store-*/sgemm_*.csv")):
    v=os.path.basename(os.path.dirname(f)).split("-")[1]
    for r in csv.DictReader(open(f)):
        if r["kind"]!="variant" or r["status"]!="ok": continue
        key=(r["shape"], f'{r["BM"]}x{r["BN"]}x{r["BK"]}w{r["WARP_N"]}s{r["STAGES"]}', r["ORDER"], v)
        rows.setdefault(key,[]).append(f'{100*float(r["frac_of_roof"]):.1f}')
for k in sorted(rows): print(*k, " | ".join(rows[k]))
PY
fi
if [ "$what" = confirm ] || [ "$what" = confirm2 ]; then
  # With CSTORE in the template (default scalar, ORDER default snakek): the default search
  # (`tune --op sgemm --shape S`) at the shapes of the README's table; confirm first does the
  # winners' tiles at 1000^3 and 1024^3 with both stores (thread tiles of 4 columns).
  if [ "$what" = confirm ]; then
    RESULTS=$OUT/tn4 run --op sgemm --strategy exhaustive --shape 1000x1000x1000 "${common[@]}" --param CSTORE=vec4,scalar \
      --param BM=32,64 --param BN=64 --param BK=32 --param TN=4 --param WARP_N=16 --param PAD=0 --param STAGES=2,3 --param BOUNDS=edge
    RESULTS=$OUT/tn4 run --op sgemm --strategy exhaustive --shape 1024x1024x1024 "${common[@]}" --param CSTORE=vec4,scalar \
      --param BM=32,64 --param BN=64 --param BK=32 --param TN=4 --param WARP_N=16 --param PAD=0 --param STAGES=2,3 --param BOUNDS=specialized
    shapes="4096x4096x4096 3000x2000x1500 1000x1000x1000 999x1001x1003 2048x2048x2048"
  else
    shapes="1024x1024x1024 1023x1025x1027 2047x2049x2051"
    RESULTS=$OUT/main run --op transpose --shape 1000x1000
  fi
  for shape in $shapes; do
    [ $SECONDS -lt 500 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
fi
tar czf "$OUT/session8-$what.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
for f in "$OUT"/ncu/*.txt; do
  [ -f "$f" ] || continue
  echo "-- $(basename "$f")"
  grep -E "Issued Warp Per Scheduler|Registers Per Thread|Theoretical Active Warps|stalled_(long|short|mio|barrier|wait|not_sel|math)|Shared Load  |Shared Store  |L1/TEX Cache Throughput|Duration" "$f" | sed 's/  */ /g' | head -20
done
grep -E "^== tune|cublas_sgemm  |^Best|exit [0-9]" "$log" | tail -20
