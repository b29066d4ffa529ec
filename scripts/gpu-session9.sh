#!/usr/bin/env bash
# Issue 10, session 9: the REPACK=1 prologue at shapes whose K or N is not a multiple of 4.
# Modes repack and repack2 ran on template states that were measured and not kept; templates/
# holds the session-8 copy again, so re-running them now compares that copy with itself. The
# records: results/session9/pdl-src.diff (the programmatic-dependent-launch code of `repack`),
# results/session9/sgemm_repack_rows4.cu (the copy of `repack2`).
#   repack: 1. the same configurations (stored winners' tiles at 999x1001x1003,
#              1023x1025x1027 and 2047x2049x2051, ORDER row/snake/snakek) with three templates,
#              alternating twice: `old` (.gpu/tv/old: HEAD before session 9, one row of AP/BP
#              per block row, scalar loads), `noov` (.gpu/tv/noov: a copy of 4 rows a thread
#              with aligned float4 loads, launched the ordinary way) and `new` (the same copy,
#              sgemm launched as its programmatic dependent, waiting with griddepcontrol.wait);
#           2. the default search at the three shapes on `new`;
#           3. the repacked-sgemm GPU test on `new`.
#   repack2: the copy rewritten so that each thread issues its 8 float4 loads before using any
#           (the first rewrite used each row's loads before issuing the next row's: slower than
#           `old`), and no programmatic dependent launch (it made 999x1001x1003 slower):
#           1. Nsight Compute time and DRAM bytes of the copy alone, old and new, at the three
#           shapes; 2. `old` against `new`, same configurations, alternating twice; 3. the
#           default search at the three shapes; 4. the repacked-sgemm GPU test (started; the time
#           limit cut it, so `final` ran it).
#   final: (the copy back to its session-8 form) 1. Nsight Compute durations of the copy, the
#          GEMM and cuBLAS's kernel apart, at 999x1001x1003 and 2047x2049x2051 (stored
#          winners' tiles); 2. the main job; 3. the repacked-sgemm GPU test.
#   warm: the default search (`tune --op sgemm --shape S`) with the warm start (the stored
#         winners of results/best.csv measured first, copied into the --out folder) against
#         --no-warm-start, same run, at 999x1001x1003, 2047x2049x2051 and 3000x2000x1500.
# Results: results/session9/. Logs go to $OUT (default ./gpu-out), tarred into
# $OUT/session9-<mode>.tar.gz (the device tool returns at most 8 files).
# Usage: bash scripts/gpu-session9.sh [repack|repack2|final|warm]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
what=${1:-repack}
log="$OUT/session9-$what.log"
. "$(dirname "$0")/gpu-run.sh"
rep=(--strategy exhaustive --param VEC=4 --param LOAD=async --param TM=8 --param OCCUPANCY=0 --param GROUP_M=8
  --param REPACK=1 --param ORDER=row,snake,snakek)
w999=(--param BM=64 --param BN=64 --param BK=16,32 --param TN=4 --param WARP_N=16 --param PAD=0,4 --param STAGES=2
  --param BOUNDS=specialized)
w1023=(--param BM=64,128 --param BN=32 --param BK=16,32 --param TN=4 --param WARP_N=8 --param PAD=0 --param STAGES=2,3
  --param BOUNDS=specialized)
w2047=(--param BM=128 --param BN=64 --param BK=16 --param TN=8 --param WARP_N=8 --param PAD=0 --param STAGES=3
  --param BOUNDS=specialized)
if [ "$what" = repack ]; then
  for round in 1 2; do
    for v in old noov new; do
      dir=.gpu/tv/$v; [ $v = new ] && dir=templates
      R=$OUT/ab-$v-$round
      RESULTS=$R run --op sgemm --templates $dir --shape 999x1001x1003 "${rep[@]}" "${w999[@]}"
      RESULTS=$R run --op sgemm --templates $dir --shape 1023x1025x1027 "${rep[@]}" "${w1023[@]}"
      RESULTS=$R run --op sgemm --templates $dir --shape 2047x2049x2051 "${rep[@]}" "${w2047[@]}"
    done
  done
  for shape in 999x1001x1003 1023x1025x1027 2047x2049x2051; do
    [ $SECONDS -lt 330 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
  left=$((590 - SECONDS))
  if [ $left -gt 60 ]; then
    TUNE_EXE=$PWD/.gpu/tune timeout $left ./.gpu/gpu-tests --test-threads 1 repacked 2>&1 \
      | tee "$OUT/gpu-tests-repack.log" | grep -E "^test |test result|panicked"
  fi
fi
if [ "$what" = repack2 ]; then
  mkdir -p "$OUT/ncu"
  for v in old new; do
    dir=.gpu/tv/$v; [ $v = new ] && dir=templates
    for shape in 999x1001x1003 1023x1025x1027 2047x2049x2051; do
      timeout 60 ncu --clock-control none -k regex:sgemm_repack -c 3 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        ./.gpu/tune --op sgemm --templates $dir --shape $shape --reps 3 --warmup 1 --out /tmp/ncu-results \
        "${rep[@]}" --param BM=128 --param BN=64 --param BK=16 --param TN=8 --param WARP_N=8 --param PAD=0 \
        --param STAGES=3 --param BOUNDS=specialized --param ORDER=row >"$OUT/ncu/repack-$v-$shape.txt" 2>&1
      echo "ncu $v $shape: $(grep -E 'gpu__time_duration' "$OUT/ncu/repack-$v-$shape.txt" | awk '{print $NF}' | tr '\n' ' ') us" | tee -a "$log"
    done
  done
  for round in 1 2; do
    for v in old new; do
      dir=.gpu/tv/$v; [ $v = new ] && dir=templates
      R=$OUT/ab-$v-$round
      RESULTS=$R run --op sgemm --templates $dir --shape 999x1001x1003 "${rep[@]}" "${w999[@]}"
      RESULTS=$R run --op sgemm --templates $dir --shape 1023x1025x1027 "${rep[@]}" "${w1023[@]}"
      RESULTS=$R run --op sgemm --templates $dir --shape 2047x2049x2051 "${rep[@]}" "${w2047[@]}"
    done
  done
  for shape in 999x1001x1003 1023x1025x1027 2047x2049x2051; do
    [ $SECONDS -lt 300 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
  left=$((590 - SECONDS))
  if [ $left -gt 330 ]; then
    TUNE_EXE=$PWD/.gpu/tune timeout $left ./.gpu/gpu-tests --test-threads 1 repacked 2>&1 \
      | tee "$OUT/gpu-tests-repack.log" | grep -E "^test |test result|panicked"
  fi
fi
if [ "$what" = final ]; then
  mkdir -p "$OUT/ncu"
  one=(--strategy exhaustive --param VEC=4 --param LOAD=async --param TM=8 --param OCCUPANCY=0 --param GROUP_M=8
    --param REPACK=1)
  t999=(--param BM=64 --param BN=64 --param BK=32 --param TN=4 --param WARP_N=16 --param PAD=0 --param STAGES=2
    --param BOUNDS=edge --param ORDER=snake)
  t2047=(--param BM=128 --param BN=64 --param BK=16 --param TN=8 --param WARP_N=8 --param PAD=0 --param STAGES=3
    --param BOUNDS=specialized --param ORDER=row)
  for shape in 999x1001x1003 2047x2049x2051; do
    t=("${t999[@]}"); [ $shape = 2047x2049x2051 ] && t=("${t2047[@]}")
    for k in '^sgemm_repack$' '^sgemm$' '^sm'; do
      timeout 60 ncu --clock-control none -k "regex:$k" -c 3 --metrics gpu__time_duration.sum,dram__bytes_read.sum \
        ./.gpu/tune --op sgemm --shape $shape --reps 3 --warmup 1 --out /tmp/ncu-results "${one[@]}" "${t[@]}" \
        >"$OUT/ncu/split-$shape-${k//[^a-z_]/}.txt" 2>&1
      echo "ncu $shape $k: $(grep -E 'gpu__time_duration' "$OUT/ncu/split-$shape-${k//[^a-z_]/}.txt" | awk '{print $NF}' | tr '\n' ' ') us" | tee -a "$log"
    done
  done
  RESULTS=$OUT/main run --op transpose --shape 1000x1000
  left=$((590 - SECONDS))
  TUNE_EXE=$PWD/.gpu/tune timeout $left ./.gpu/gpu-tests --test-threads 1 repacked 2>&1 \
    | tee "$OUT/gpu-tests-repack.log" | grep -E "^test |test result|panicked"
fi
if [ "$what" = warm ]; then
  for shape in 999x1001x1003 2047x2049x2051 3000x2000x1500; do
    mkdir -p "$OUT/warm-$shape" && cp results/best.csv "$OUT/warm-$shape/best.csv"
    RESULTS=$OUT/warm-$shape run --op sgemm --shape $shape
    RESULTS=$OUT/cold-$shape run --op sgemm --shape $shape --no-warm-start
  done
  grep -h "stored winner" "$OUT/stderr.log" | tee -a "$log"
fi
tar czf "$OUT/session9-$what.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
# Best per run: shape, template, % of cuBLAS.
python3 - "$OUT" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
for f in sorted(glob.glob(os.path.join(out, "*", "sgemm_*.csv"))):
    rows = list(csv.DictReader(open(f)))
    ok = [r for r in rows if r["kind"] != "baseline" and r["status"] == "ok"]
    bad = sum(1 for r in rows if r["kind"] != "baseline" and r["status"] not in ("ok", "pruned"))
    if not ok:
        print(f, "no ok rows", bad); continue
    b = max(ok, key=lambda r: float(r["frac_of_roof"]))
    print(f"{os.path.basename(os.path.dirname(f)):14} {b['shape']:16} best {float(b['frac_of_roof'])*100:6.1f} % "
          f"{float(b['median_ms']):.4f} ms  {len(ok)} ok {bad} not ok  "
          f"{b['BM']}x{b['BN']}x{b['BK']} TN={b['TN']} PAD={b['PAD']} ST={b['STAGES']} {b['ORDER']}")
PY
grep -E "^Best|exit [0-9]" "$log" | tail -30
