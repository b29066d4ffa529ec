#!/usr/bin/env bash
# Issue 10, session 10: WINDOWS=1, float4 loads without a copy where K or N is not a multiple
# of 4 (templates/sgemm.cu.tera, issue_slice), against REPACK=1 (a copy kernel first).
#   ab: 1. the same configurations (stored winners' tiles at 999x1001x1003, 1023x1025x1027 and
#          2047x2049x2051, ORDER snake/snakek) with REPACK=1 and with WINDOWS=1 (two versions),
#          same run, alternating twice (once at 1023 and at two shapes with only N or only K
#          odd); 2. the windowed and repacked GPU test (every variant verified at six odd shapes).
#   ab2: the same, after B's window addresses were rewritten (slice-invariant offsets) and
#        without wsa, both rounds at all five shapes; run again (NO_TEST=1) after the loop of
#        interior slices was split from the edge slices (h100_ab3.log), and again (h100_ab4.log)
#        after interior slices stopped checking B and checked A by row only.
#   ncu: Nsight Compute (full set) of the repacked and the windowed GEMM at 1000x1001x1000 and
#        999x1001x1003.
#   stalls: Nsight Compute warp states of the two GEMMs at 999x1001x1003.
#   search: an exhaustive sweep of WINDOWS=1 tiles (384) at 999x1001x1003, 2047x2049x2051 and
#           1023x1025x1027, each followed by the stored REPACK=1 winner's tile in the same run.
#   final: WINDOWS=0,1 in the default space: the windowed GPU test, then the default search at
#          the three odd shapes.
#   final2: WINDOWS=1 variants verified at small odd shapes through the CLI; the default
#           search at 2047x2049x2051.
#   final3: the windowed GPU test, the default search at 2047x2049x2051, the main job.
# Results: results/session10/. Logs go to $OUT (default ./gpu-out), tarred into
# $OUT/session10-<mode>.tar.gz (the device tool returns at most 8 files).
# Usage: bash scripts/gpu-session10.sh [ab|ab2|ncu|stalls|search|final|final2|final3]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
what=${1:-ab}
log="$OUT/session10-$what.log"
. "$(dirname "$0")/gpu-run.sh"
base=(--strategy exhaustive --param VEC=4 --param LOAD=async --param TM=8 --param OCCUPANCY=0 --param GROUP_M=8
  --param ORDER=snake,snakek)
w999=(--param BM=64 --param BN=64 --param BK=32 --param TN=4 --param WARP_N=16 --param PAD=0 --param STAGES=2
  --param BOUNDS=edge)
w1023=(--param BM=64 --param BN=32 --param BK=32 --param TN=4 --param WARP_N=8 --param PAD=4 --param STAGES=2
  --param BOUNDS=edge)
w2047=(--param BM=128 --param BN=64 --param BK=16 --param TN=8 --param WARP_N=8 --param PAD=0 --param STAGES=3
  --param BOUNDS=specialized,edge)
if [ "$what" = ab ] || [ "$what" = ab2 ]; then
  # Ways: repack (REPACK=1), win (WINDOWS=1, templates/), wsa (WINDOWS=1 as first built: a
  # kernel per slice offset, B always through shifted windows; .gpu/tv/d).
  for round in 1 2; do
    ways="repack win wsa"; [ "$what" = ab2 ] && ways="repack win"
    for way in $ways; do
      R=$OUT/ab-$way-$round
      p=(--param REPACK=0 --param WINDOWS=1); [ $way = repack ] && p=(--param REPACK=1 --param WINDOWS=0)
      t=(); [ $way = wsa ] && t=(--templates .gpu/tv/d)
      RESULTS=$R run --op sgemm "${t[@]}" --shape 999x1001x1003 "${base[@]}" "${w999[@]}" "${p[@]}"
      RESULTS=$R run --op sgemm "${t[@]}" --shape 2047x2049x2051 "${base[@]}" "${w2047[@]}" "${p[@]}"
      [ $round = 1 ] || [ "$what" = ab2 ] || continue
      RESULTS=$R run --op sgemm "${t[@]}" --shape 1023x1025x1027 "${base[@]}" "${w1023[@]}" "${p[@]}"
      # Where only B (N odd) or only A (K odd) is misaligned.
      RESULTS=$R run --op sgemm "${t[@]}" --shape 1000x1001x1000 "${base[@]}" "${w999[@]}" "${p[@]}"
      RESULTS=$R run --op sgemm "${t[@]}" --shape 1000x1000x1003 "${base[@]}" "${w999[@]}" "${p[@]}"
    done
  done
  [ "${NO_TEST:-}" ] || TUNE_EXE=$PWD/.gpu/tune timeout $((580 - SECONDS)) ./.gpu/gpu-tests --test-threads 1 windowed 2>&1 \
    | tee "$OUT/gpu-tests-windowed.log" | grep -E "^test |test result|panicked|failed"
fi
if [ "$what" = ncu ]; then
  # Nsight Compute, full set, one launch of each GEMM (the repacked one and the windowed one) at
  # a shape with only N odd and at 999x1001x1003.
  mkdir -p "$OUT/ncu"
  for shape in 1000x1001x1000 999x1001x1003; do
    for way in repack win; do
      p=(--param REPACK=0 --param WINDOWS=1); [ $way = repack ] && p=(--param REPACK=1 --param WINDOWS=0)
      timeout 120 ncu --clock-control none -k regex:'^sgemm$' --launch-skip 1 -c 1 --set full \
        ./.gpu/tune --op sgemm --shape $shape --reps 3 --warmup 1 --out /tmp/ncu-results "${base[@]}" "${w999[@]}" \
        --param ORDER=snakek "${p[@]}" >"$OUT/ncu/full-$shape-$way.txt" 2>&1
      echo "ncu $shape $way: $(grep -E 'Duration|Executed Ipc Active|Registers Per|Achieved Occupancy|Bank Conflicts|L2 Hit|Issue Slots Busy' "$OUT/ncu/full-$shape-$way.txt" | awk '{print $1,$2,$NF}' | tr '\n' ';')" | tee -a "$log"
    done
  done
fi
if [ "$what" = stalls ]; then
  # Where the warps of each GEMM wait (Nsight Compute warp-state sampling), 999x1001x1003.
  mkdir -p "$OUT/ncu"
  for way in repack win; do
    p=(--param REPACK=0 --param WINDOWS=1); [ $way = repack ] && p=(--param REPACK=1 --param WINDOWS=0)
    timeout 120 ncu --clock-control none -k regex:'^sgemm$' --launch-skip 1 -c 1 --section WarpStateStats \
      --section SourceCounters --print-details all ./.gpu/tune --op sgemm --shape 999x1001x1003 --reps 3 --warmup 1 \
      --out /tmp/ncu-results "${base[@]}" "${w999[@]}" --param ORDER=snakek "${p[@]}" >"$OUT/ncu/stalls-$way.txt" 2>&1
  done
fi
if [ "$what" = final ]; then
  # WINDOWS=0,1 in the default space: the GPU test, then the default search (warm start from
  # results/best.csv copied into the --out folder) at the three odd shapes.
  TUNE_EXE=$PWD/.gpu/tune timeout 240 ./.gpu/gpu-tests --test-threads 1 windowed 2>&1 \
    | tee "$OUT/gpu-tests-windowed.log" | grep -E "^test |test result|panicked|failed"
  # (As run in session 10, the copy below sat inside the loop, so each shape's start put the
  # stored best.csv back over the rows the previous shape had written; fixed here.)
  mkdir -p "$OUT/default" && cp results/best.csv "$OUT/default/best.csv"
  for shape in 999x1001x1003 1023x1025x1027 2047x2049x2051; do
    [ $SECONDS -lt 470 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
fi
if [ "$what" = final2 ]; then
  # What the windowed GPU test checks, through the CLI (the test ran past 240 s in `final`):
  # WINDOWS=1 variants at small odd shapes, every bounds mode, both C stores, each verified
  # against the float64 reference; then the default search at 2047x2049x2051.
  for shape in 97x65x47 130x64x66 96x66x64 70x131x257 9x37x5 1023x1025x1027; do
    RESULTS=$OUT/small run --op sgemm --shape $shape --param WINDOWS=1 --param REPACK=0 --strategy random \
      --budget 16 --param BOUNDS=none,always,specialized,edge --param CSTORE=vec4,scalar
  done
  mkdir -p "$OUT/default" && cp results/best.csv "$OUT/default/best.csv"
  RESULTS=$OUT/default run --op sgemm --shape 2047x2049x2051
fi
if [ "$what" = final3 ]; then
  # After the space's setup was made fast (src/expr.rs): the windowed GPU test, the default
  # search at 2047x2049x2051, the main job.
  TUNE_EXE=$PWD/.gpu/tune timeout 300 ./.gpu/gpu-tests --test-threads 1 windowed 2>&1 \
    | tee "$OUT/gpu-tests-windowed.log" | grep -E "^test |test result|panicked|failed"
  mkdir -p "$OUT/default" && cp results/best.csv "$OUT/default/best.csv"
  [ $SECONDS -lt 420 ] && RESULTS=$OUT/default run --op sgemm --shape 2047x2049x2051
  [ $SECONDS -lt 520 ] && RESULTS=$OUT/main run --op transpose --shape 1000x1000
fi
if [ "$what" = search ]; then
  # WINDOWS=1 over 384 tiles and orders at each shape, with the repacked stored winner's tile
  # in the same run for reference.
  sweep=(--strategy exhaustive --param VEC=4 --param LOAD=async --param WINDOWS=1 --param REPACK=0 --param TM=8
    --param BM=64,128 --param BN=32,64,128 --param BK=16,32 --param TN=4,8 --param WARP_N=8,16 --param PAD=0,4
    --param STAGES=2,3 --param BOUNDS=edge --param ORDER=snake,snakek)
  for shape in 999x1001x1003 2047x2049x2051 1023x1025x1027; do
    w=("${w999[@]}"); [ $shape = 2047x2049x2051 ] && w=("${w2047[@]}"); [ $shape = 1023x1025x1027 ] && w=("${w1023[@]}")
    [ $SECONDS -lt 450 ] && RESULTS=$OUT/sweep run --op sgemm --shape $shape "${sweep[@]}"
    [ $SECONDS -lt 540 ] && RESULTS=$OUT/ref run --op sgemm --shape $shape "${base[@]}" "${w[@]}" --param REPACK=1
  done
fi
tar czf "$OUT/session10-$what.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
# Best per run: shape, way, % of cuBLAS.
python3 - "$OUT" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
for f in sorted(glob.glob(os.path.join(out, "*", "sgemm_*.csv"))):
    rows = list(csv.DictReader(open(f)))
    ok = [r for r in rows if r["kind"] != "baseline" and r["status"] == "ok"]
    bad = sum(1 for r in rows if r["kind"] != "baseline" and r["status"] not in ("ok", "pruned"))
    if not ok:
        print(f, "no ok rows", bad); continue
    for b in sorted(ok, key=lambda r: -float(r["frac_of_roof"]))[:3]:
        print(f"{os.path.basename(os.path.dirname(f)):12} {b['shape']:15} {float(b['frac_of_roof'])*100:6.1f} % "
              f"{float(b['median_ms'])*1000:7.1f} us {len(ok)} ok {bad} bad R{b['REPACK']} W{b.get('WINDOWS','-')} "
              f"{b['BM']}x{b['BN']}x{b['BK']} TN={b['TN']} WN={b['WARP_N']} PAD={b['PAD']} ST={b['STAGES']} "
              f"{b['BOUNDS']} {b['ORDER']}")
PY
grep -E "exit [0-9]" "$log" | sort | uniq -c
