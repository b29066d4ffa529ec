#!/usr/bin/env bash
# Issue 12 on a machine with two GPUs of one model (nvidia-h200-x2), binaries from
# scripts/gpu-build.sh in .gpu/. Output: $OUT/multi2.log (+ summaries, merged CSVs).
#  1. sweeps of 8 transpose shapes and 8 sgemm shapes with --gpus all vs --gpus 0;
#  2. the same sweeps as two shards run at once on the two GPUs, then tune merge;
#  3. an sgemm sweep with --gpus all where one GPU worker is killed (SIGKILL) mid-run.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-multi-cache TUNE_EXE=$PWD/.gpu/tune
T=./.gpu/tune
log="$OUT/multi2.log"
nvidia-smi --query-gpu=index,name,uuid --format=csv | tee "$log"
TS="1000x1000,1024x1024,2048x2048,4096x4096,8192x8192,8191x8191,1000x3000,4096x1024"
MS="1024x1024x1024,2048x2048x2048,4096x4096x4096,1000x1000x1000,3000x2000x1500,2048x1024x4096,1536x1536x1536,4096x1024x1024"
MP="--param BM=64,128 --param BN=64,128 --param BK=8,16 --param TM=8 --param TN=4,8 --param VEC=4 --param PAD=4 --param OCCUPANCY=0"
W=/tmp/m2; rm -rf $W; mkdir -p $W
now() { date +%s%N; }
wall() { local ms=$(( ($(now) - $1) / 1000000 )); echo "$((ms / 1000)).$(printf %03d $((ms % 1000)))"; }
sweep() { # label, then args
  local label=$1; shift
  local t0=$(now)
  $T "$@" --out "$W/$label" > "$W/$label.out" 2>&1
  echo "== $label: tune $* -> exit $?, wall $(wall $t0) s" | tee -a "$log"
  sed -n '/^Summary:/,$p' "$W/$label.out" | tee -a "$log"
}
# Warm the cubin cache first so both sides time tuning, not compiling.
$T --op transpose --shape $TS --compile-only > /dev/null 2>&1
$T --op sgemm --shape $MS $MP --compile-only > /dev/null 2>&1
sweep t-all --op transpose --shape $TS --gpus all
sweep t-gpu0 --op transpose --shape $TS --gpus 0
sweep m-all --op sgemm --shape $MS $MP --strategy exhaustive --gpus all
sweep m-gpu0 --op sgemm --shape $MS $MP --strategy exhaustive --gpus 0
echo "== shards: 0/2 on GPU 0 and 1/2 on GPU 1 at the same time, then merge" | tee -a "$log"
t0=$(now)
$T --op transpose --shape $TS --shard 0/2 --gpus 0 --out $W/ts/s0 > $W/ts0.out 2>&1 &
$T --op transpose --shape $TS --shard 1/2 --gpus 1 --out $W/ts/s1 > $W/ts1.out 2>&1 &
wait; echo "transpose shards: wall $(wall $t0) s" | tee -a "$log"
$T merge $W/ts/s0 $W/ts/s1 --out $W/ts-merged 2>&1 | tee -a "$log"
t0=$(now)
$T --op sgemm --shape $MS $MP --strategy exhaustive --shard 0/2 --gpus 0 --out $W/ms/s0 > $W/ms0.out 2>&1 &
$T --op sgemm --shape $MS $MP --strategy exhaustive --shard 1/2 --gpus 1 --out $W/ms/s1 > $W/ms1.out 2>&1 &
wait; echo "sgemm shards: wall $(wall $t0) s" | tee -a "$log"
$T merge $W/ms/s0 $W/ms/s1 --out $W/ms-merged 2>&1 | tee -a "$log"
echo "== killed worker: sgemm sweep --gpus all, SIGKILL to the GPU 1 worker after 6 s" | tee -a "$log"
t0=$(now)
$T --op sgemm --shape $MS $MP --strategy exhaustive --gpus all --out $W/kill > $W/kill.out 2>&1 &
pid=$!
sleep 6
victim=$(pgrep -f "__gpu-worker 1" | head -n 1)
echo "killing GPU 1 worker pid $victim at $(wall $t0) s" | tee -a "$log"
[ -n "$victim" ] && kill -9 $victim
wait $pid; echo "exit $?, wall $(wall $t0) s" | tee -a "$log"
grep -iE "worker|restart|lost|died" $W/kill.out | head -n 10 | tee -a "$log"
sed -n '/^Summary:/,$p' $W/kill.out | tee -a "$log"
python3 - $W >> "$log" 2>&1 <<'PY'
import csv, glob, sys, os
w = sys.argv[1]
def best(d):
    rows = list(csv.DictReader(open(os.path.join(w, d, "best.csv"))))
    return {(r["op"], r["shape"]): r for r in rows}
def runs(d):
    out = {}
    for f in glob.glob(os.path.join(w, d, "*.csv")):
        if f.endswith("best.csv"): continue
        rows = list(csv.DictReader(open(f)))
        out[os.path.basename(f)] = rows
    return out
print("== comparison of winners (params, median ms)")
for a, b in [("t-all", "t-gpu0"), ("t-all", "ts-merged"), ("m-all", "m-gpu0"), ("m-all", "ms-merged"), ("m-all", "kill")]:
    A, B = best(a), best(b)
    same = sum(1 for k in A if k in B and A[k]["params"] == B[k]["params"])
    ratio = [float(B[k]["median_ms"]) / float(A[k]["median_ms"]) for k in A if k in B]
    print(f"{a} vs {b}: {len(A)} / {len(B)} shapes, same winner {same}, median-ms ratio {min(ratio):.3f}..{max(ratio):.3f}")
    for k in A:
        if k in B and A[k]["params"] != B[k]["params"]:
            print(f"   {k[1]}: {A[k]['params']} {A[k]['median_ms'][:7]} vs {B[k]['params']} {B[k]['median_ms'][:7]}")
k = runs("kill")
notrun = sum(1 for rows in k.values() for r in rows if r["status"] == "failed")
ok = sum(1 for rows in k.values() for r in rows if r["status"] == "ok")
print(f"killed-worker run: {len(k)} run CSVs, {ok} ok rows, {notrun} failed rows")
for f, rows in k.items():
    for r in rows:
        if r["status"] == "failed": print("   failed:", f, r["name"], r["error"][:120])
PY
tar -C $W -czf "$OUT/multi2-results.tar.gz" t-all t-gpu0 m-all m-gpu0 ts ms ts-merged ms-merged kill
cp $W/kill.out "$OUT/kill.out"
tail -n 60 "$log"
