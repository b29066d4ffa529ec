#!/usr/bin/env bash
# The cluster path of `tune` on a real Slurm, on the GPU machine (`bash scripts/gpu.sh slurm`).
# It starts a single-node Slurm (scripts/slurm-local.sh; from the packages unpacked in .slurm/
# where that exists) with the GPU as the generic resource gpu, and tunes one small sweep (4
# transpose shapes, every valid variant of a space of 16) three ways:
#
#   1. unsharded: one `tune` process, empty cubin cache: the reference winners
#   2. cold:      the GPU array of 2 tasks and the merge (deploy/slurm/tune-array.sh), from an
#                 empty cache
#   3. prebuilt:  the prebuild (a compile-only CPU array of 4 tasks) and then the same GPU
#                 array and merge, one chain of jobs, from an empty cache
#
# then prints the wall time of each stage, the sources each GPU task found in the cache, and
# the merged winners of 2 and 3 against the unsharded ones (the same configuration, a tie the
# unsharded run reports, or a difference).
#
#   bash scripts/gpu-slurm.sh run            all of the above (needs the GPU)
#   bash scripts/gpu-slurm.sh run --no-gpu   Slurm, the prebuild and an unsharded compile-only
#                                            run that must find every source in the prebuilt
#                                            cache: all but the GPU part, on any machine
#   bash scripts/gpu-slurm.sh compare UNSHARDED_DIR MERGED_DIR
#                                            the winners of MERGED_DIR/best.csv against those
#                                            of UNSHARDED_DIR (its best.csv and run CSVs)
#
# Environment: GPU_BIN (the folder holding `tune`, default .gpu/), OUT (default gpu-out/:
# slurm.log, the jobs' logs, both best.csv files), SLURM_PREFIX (default .slurm where it
# exists, else the system's Slurm), TUNE_ARCH (default: the GPU's, sm_90 with --no-gpu).
# Exit status: 0 done (winners the same or reported ties), 1 a step failed or a winner differs,
# 2 bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

compare() {
    python3 - "$1" "$2" <<'PY'
import csv, glob, os, sys

unsharded, merged = sys.argv[1], sys.argv[2]

def best(folder):
    with open(os.path.join(folder, "best.csv"), newline="") as f:
        return {(r["op"], r["shape"], r["dtype"], r["gpu"]): r for r in csv.DictReader(f)}

def params(text):
    return dict(p.split("=", 1) for p in text.split(";") if p)

def run_rows(folder, op, shape, dtype):
    """The variant rows of the run CSV of (op, shape, dtype) in folder."""
    stem = f"{op}_{shape}_" + ("" if dtype == "f32" else f"{dtype}_")
    rows = []
    for path in glob.glob(os.path.join(folder, stem + "*.csv")):
        if path.endswith("-compile-only.csv"):
            continue
        with open(path, newline="") as f:
            rows += [r for r in csv.DictReader(f) if r["kind"] == "variant" and r["dtype"] == dtype]
    return rows

def find(rows, want):
    for r in rows:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None

ref, got = best(unsharded), best(merged)
counts = {"same": 0, "tie": 0, "different": 0, "missing": 0}
for key in sorted(ref):
    op, shape, dtype, gpu = key
    a = ref[key]
    label = f"{op} {shape} {dtype}"
    b = got.get(key)
    if b is None:
        counts["missing"] += 1
        print(f"  {label:<28} MISSING: the merge has no winner for it")
        continue
    ms_a, ms_b = float(a["median_ms"]), float(b["median_ms"])
    if params(a["params"]) == params(b["params"]):
        counts["same"] += 1
        print(f"  {label:<28} same winner ({a['params']}): unsharded {ms_a * 1e3:.2f} us, merged {ms_b * 1e3:.2f} us")
        continue
    row = find(run_rows(unsharded, op, shape, dtype), params(b["params"]))
    if row is not None and row.get("tied") == "true":
        counts["tie"] += 1
        print(f"  {label:<28} tie: the merged winner {b['params']} is tied with the unsharded winner "
              f"in the unsharded run's confirmation ({float(row['vs_winner_pct']):+.1f} % "
              f"[{float(row['vs_winner_ci_low_pct']):+.1f}, {float(row['vs_winner_ci_high_pct']):+.1f}])")
        continue
    counts["different"] += 1
    if row is not None and row.get("median_ms"):
        how = f"its median in the unsharded run is {100 * (float(row['median_ms']) / ms_a - 1):+.1f} % of that run's winner"
    else:
        how = "the unsharded run did not measure it"
    print(f"  {label:<28} DIFFERENT: merged {b['params']} ({ms_b * 1e3:.2f} us), unsharded {a['params']} "
          f"({ms_a * 1e3:.2f} us); {how}")
for key in sorted(set(got) - set(ref)):
    counts["missing"] += 1
    print(f"  {' '.join(key[:3]):<28} MISSING: the unsharded run has no winner for it")
print(f"winners: {counts['same']} same, {counts['tie']} reported ties, {counts['different']} different, "
      f"{counts['missing']} missing")
sys.exit(0 if counts["different"] == 0 and counts["missing"] == 0 else 1)
PY
}

mode=${1:-}
case "$mode" in
compare)
    (($# == 3)) || { echo "usage: $0 compare UNSHARDED_DIR MERGED_DIR" >&2; exit 2; }
    compare "$2" "$3"
    exit
    ;;
run) ;;
*)
    sed -n '2,/^set /p' "$0" | grep -v '^set ' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
gpu=1
case "${2:-}" in
"") ;;
--no-gpu) gpu=0 ;;
*) echo "usage: $0 run [--no-gpu]" >&2; exit 2 ;;
esac

OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
log=$OUT/slurm.log
: > "$log"
# say LINE: to the terminal and to $OUT/slurm.log.
say() { echo "$*" | tee -a "$log"; }
fail() { say "error: $*"; exit 1; }

bin=${GPU_BIN:-.gpu}
[[ $bin == /* ]] || bin=$root/$bin
tune=$bin/tune
[[ -x "$tune" ]] || fail "no $tune: run 'bash scripts/gpu.sh build' on the build machine and carry .gpu/"
if [[ -z "${SLURM_PREFIX:-}" && -x .slurm/usr/sbin/slurmctld ]]; then
    export SLURM_PREFIX=.slurm
fi
if [[ -z "${SLURM_PREFIX:-}" ]] && ! command -v slurmctld >/dev/null; then
    fail "no Slurm here: run 'bash scripts/slurm-local.sh prefix' on the build machine and carry .slurm/"
fi
if ((gpu)); then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)
    [[ "$cap" =~ ^[0-9]+\.[0-9]+$ ]] || fail "no GPU found by nvidia-smi (use --no-gpu for the rest)"
    arch=${TUNE_ARCH:-sm_${cap/./}}
    say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $arch"
else
    arch=${TUNE_ARCH:-sm_90}
fi

# The sweep: 4 shapes, 16 variants each (the layout and the levers without a classic value
# pinned), every variant measured, so the sharded and unsharded runs measure the same set.
work=$(mktemp -d)
printf '%s\n' 1000x1000 2048x2048 4096x1024 3000x1000 > "$work/shapes.txt"
# shellcheck disable=SC2054  # the commas are in parameter values
sweep=(--op transpose --shapes "$work/shapes.txt" --strategy exhaustive
    --param TILE_DIM=32,64 --param BLOCK_ROWS=8,16 --param PAD=1 --param UNROLL=on
    --param BOUNDS=always,specialized --param VEC=1,4 --param TILES_PER_BLOCK=1
    --param ASPECT=square --param CACHE=default --param RUNS=tile --param OCCUPANCY=0
    --param READ=elem --param LAYOUT=tile --param STAGE=none --param BLOCK_ORDER=rows)
cpus=$(nproc)
prebuild_tasks=4
prebuild_cpus=$((cpus / prebuild_tasks > 0 ? cpus / prebuild_tasks : 1))

slurm=$work/slurm
# shellcheck disable=SC2317  # called by the trap
stop_slurm() {
    bash scripts/slurm-local.sh stop "$slurm" >> "$log" 2>&1 || true
}
trap 'stop_slurm; rm -rf "$work"' EXIT
if ! bash scripts/slurm-local.sh start "$slurm" 2>&1 | tee -a "$log"; then
    fail "Slurm did not start (above)"
fi
# shellcheck disable=SC1091
source "$slurm/env.sh"

# stage_secs JOB: seconds from the first start to the last end of a job or job array.
stage_secs() {
    scontrol show job -o "$1" | tr ' ' '\n' | awk -F= '
        $1 == "StartTime" { cmd = "date -d " $2 " +%s"; cmd | getline t; close(cmd); if (!s || t < s) s = t }
        $1 == "EndTime"   { cmd = "date -d " $2 " +%s"; cmd | getline t; close(cmd); if (t > e) e = t }
        END { print e - s }'
}
# states JOB: "task=STATE ..." of a job or job array.
states() {
    scontrol show job -o "$1" | tr ' ' '\n' | awk -F= '
        $1 == "ArrayTaskId" { k = $2 }
        $1 == "JobState" { out = out (out == "" ? "" : " ") (k == "" ? "" : k "=") $2; k = "" }
        END { print out }'
}
# submit NAME RUN_DIR [VAR=VALUE ...]: submits tune-array.sh for the sweep with those settings,
# waits for every job, prints each stage's states and wall time; sets the globals ids_<stage>.
submit() {
    local name=$1 run=$2 out t0 stage id ok=1
    shift 2
    t0=$(date +%s%N)
    out=$(env TUNE="$tune" TUNE_ARCH="$arch" PREBUILD_TASKS=$prebuild_tasks PREBUILD_CPUS=$prebuild_cpus \
        PREBUILD_TUNE_ARGS="--jobs $prebuild_cpus" SHARD_CPUS=$((cpus / 2)) "$@" \
        bash deploy/slurm/tune-array.sh 2 "$run" "${sweep[@]}" 2>&1) || fail "$name: tune-array.sh: $out"
    echo "$out" >> "$log"
    # shellcheck disable=SC2034  # read through ${!var}
    ids_prebuild='' ids_shards='' ids_merge=''
    local all=()
    while read -r stage id; do
        printf -v "ids_$stage" '%s' "$id"
        all+=("$id")
    done < <(sed -n 's/^\([a-z]*\): job \(array \)\{0,1\}\([0-9]*\).*/\1 \3/p' <<< "$out")
    local list
    list=$(IFS=,; echo "${all[*]}")
    for _ in $(seq 1200); do
        [[ -z "$(squeue -h -j "$list" 2>/dev/null)" ]] && break
        sleep 0.25
    done
    [[ -z "$(squeue -h -j "$list" 2>/dev/null)" ]] || fail "$name: jobs still queued after 300 s"
    say "$name: all jobs done in $(( ($(date +%s%N) - t0) / 1000000 )) ms from submission"
    for stage in prebuild shards merge; do
        local var=ids_$stage
        id=${!var}
        [[ -n "$id" ]] || continue
        local st
        st=$(states "$id")
        say "  $stage (job $id): $st, $(stage_secs "$id") s from first start to last end"
        [[ "$st" == *COMPLETED* && "$st" != *FAILED* && "$st" != *CANCELLED* && "$st" != *TIMEOUT* ]] || ok=0
    done
    for f in "$run"/logs/*.out; do
        { echo "==== $f"; cat "$f"; } >> "$OUT/slurm-jobs.log"
    done
    ((ok)) || fail "$name: a job did not complete (logs: $OUT/slurm-jobs.log)"
}
# cache_hits RUN_DIR: per GPU task, the sources it compiled and found in the cache.
cache_hits() {
    local f
    for f in "$1"/logs/shard-*.out; do
        awk -v task="$(basename "$f" .out)" '
            /^Time: / { for (i = 1; i <= NF; i++) {
                if ($i == "unique") u += $(i - 1); if ($i == "from" && $(i + 1) == "cache;") c += $(i - 1) } }
            END { printf "    %s: %d unique sources, %d from cache\n", task, u, c }' "$f"
    done | tee -a "$log"
}
: > "$OUT/slurm-jobs.log"

if ((gpu == 0)); then
    submit "prebuild" "$work/prebuilt" STAGES=prebuild
    cubins=$(find "$work/prebuilt/cache/cubin" -name '*.bin' | wc -l)
    say "prebuild: $cubins cubins in the shared cache"
    check=$(CUDA_AUTOTUNE_CACHE=$work/prebuilt/cache "$tune" "${sweep[@]}" --compile-only --arch "$arch" \
        --out "$work/check" 2>&1) || fail "the unsharded compile-only run failed: $check"
    grep '^compile-only' <<< "$check" | tee -a "$log"
    missed=$(grep '^compile-only' <<< "$check" |
        sed -n 's/.*(\([0-9]*\) unique sources, \([0-9]*\) from cache).*/\1 \2/p' | awk '$1 != $2' | wc -l)
    ((missed == 0)) || fail "the unsharded compile-only run did not find every source in the prebuilt cache"
    say "every source of the sweep was in the prebuilt cache"
    exit 0
fi

# 1. Unsharded, empty cache.
t0=$(date +%s%N)
CUDA_AUTOTUNE_CACHE=$work/unsharded-cache "$tune" "${sweep[@]}" --out "$work/unsharded" \
    > "$OUT/slurm-unsharded.log" 2>&1 || fail "the unsharded run failed (its log: $OUT/slurm-unsharded.log)"
say "unsharded: one tune process, empty cache: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
cp "$work/unsharded/best.csv" "$OUT/slurm-unsharded-best.csv"

# 2. The GPU array and the merge, empty cache.
submit "cold" "$work/cold" STAGES=shards,merge
cache_hits "$work/cold"

# 3. Prebuild, then the GPU array and the merge, empty cache.
submit "prebuilt" "$work/prebuilt" STAGES=prebuild,shards,merge
cache_hits "$work/prebuilt"
cp "$work/prebuilt/merged/best.csv" "$OUT/slurm-merged-best.csv"

status=0
say "merged winners (cold) against the unsharded run:"
compare "$work/unsharded" "$work/cold/merged" 2>&1 | tee -a "$log" || status=1
say "merged winners (prebuilt) against the unsharded run:"
compare "$work/unsharded" "$work/prebuilt/merged" 2>&1 | tee -a "$log" || status=1
exit "$status"
