#!/usr/bin/env bash
# On the GPU machine, with .gpu/tune built by scripts/gpu-build.sh: tunes transpose 1000x1000
# whole and as 3 variant shards, merges them twice (the second must change no byte), then a
# sweep of 8 shapes as 2 shape shards, and two refused merges. Log and merged CSVs in $OUT.
set -uo pipefail
T=$PWD/.gpu/tune
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export CUDA_AUTOTUNE_CACHE=/tmp/cc
W=/tmp/w; rm -rf $W; mkdir -p $W
log=$OUT/shard-check.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
step() { echo "== $*" | tee -a $log; }
step "unsharded 1000x1000"
$T --op transpose --shape 1000x1000 --out $W/whole --top 3 >>$log 2>&1; echo "exit $?" | tee -a $log
for k in 0 1 2; do
  step "shard $k/3"
  $T --op transpose --shape 1000x1000 --shard $k/3 --out $W/run/shard-$k --top 3 >>$log 2>&1; echo "exit $?" | tee -a $log
  ls $W/run/shard-$k | tee -a $log
done
step "merge"
$T merge $W/run/shard-0 $W/run/shard-1 $W/run/shard-2 --out $W/run/merged >>$log 2>&1; echo "exit $?" | tee -a $log
( cd $W/run/merged && sha256sum * ) > $W/sum1
$T merge $W/run/shard-0 $W/run/shard-1 $W/run/shard-2 --out $W/run/merged >/dev/null 2>&1
( cd $W/run/merged && sha256sum * ) > $W/sum2
cmp $W/sum1 $W/sum2 && echo "second merge: identical bytes" | tee -a $log
python3 - $W >>$log 2>&1 <<'PY'
import csv, glob, sys
w = sys.argv[1]
def rows(p): return list(csv.DictReader(open(glob.glob(p)[0])))
a = rows(f"{w}/whole/transpose_1000x1000_*.csv")
b = rows(f"{w}/run/merged/transpose_1000x1000_*.csv")
print("rows whole/merged:", len(a), len(b), "names equal:", [r["name"] for r in a] == [r["name"] for r in b])
print("status equal:", [r["status"] for r in a] == [r["status"] for r in b])
for k in range(3):
    s = rows(f"{w}/run/shard-{k}/transpose_1000x1000_*.csv")
    print(f"shard {k}: {len(s)} rows, measured {sum(1 for r in s if r['kind']=='variant' and r['status']!='pruned')}, winner flags {sum(1 for r in s if r['winner']=='true')}")
ok = [r for r in b if r["kind"]=="variant" and r["status"]=="ok"]
best = min(ok, key=lambda r: float(r["median_ms"]))
print("merged fastest:", best["name"], best["median_ms"], best["frac_of_roof"], best["roof"])
print("whole winner:", [ (r["name"], r["median_ms"]) for r in a if r["winner"]=="true"])
print("best.csv in shard dirs:", any(__import__("os").path.exists(f"{w}/run/shard-{k}/best.csv") for k in range(3)))
PY
cat $W/run/merged/best.csv >>$log
head -c 1500 $W/run/shard-1/shard-1-of-3.json >>$log; echo >>$log
head -c 300 $W/run/merged/*.journal.jsonl >>$log; echo >>$log
wc -l $W/run/*/*.journal.jsonl >>$log
step "shape split: 8 shapes, 2 shards, --gpus 0"
S=512x512,1000x1000,1024x1024,2000x300,300x2000,1000x3000,4096x1024,2048x2048
for k in 0 1; do
  $T --op transpose --shape $S --param TILE_DIM=32,64 --param BLOCK_ROWS=4,8 --shard $k/2 --out $W/sh/s$k --top 1 --gpus 0 2>&1 | grep -E "^====|shard|error" | tee -a $log
done
$T merge $W/sh/s0 $W/sh/s1 --out $W/sh/merged 2>&1 | tee -a $log
step "refusals"
$T merge $W/sh/s0 --out $W/sh/m2 2>&1 | tee -a $log
$T merge $W/sh/s0 $W/run/shard-0 --out $W/sh/m2 2>&1 | tee -a $log
cp $W/run/merged/best.csv $OUT/merged-best.csv
cp $W/run/merged/transpose_1000x1000_*.csv $OUT/merged-1000x1000.csv
