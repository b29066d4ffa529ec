#!/usr/bin/env bash
# Tune a sweep on a Slurm cluster in up to three stages, each a job that Slurm starts only
# when the stage before it succeeded (--dependency=afterok), so nothing runs between the jobs:
#
#   prebuild  a job array of CPU tasks (no GPU): task K runs `tune --compile-only
#             --arch TUNE_ARCH --shard K/P`, filling the shared cubin cache with what the GPU
#             tasks will compile
#   shards    a job array of N tasks, one GPU each: task K runs `tune --shard K/N`, and finds
#             every source the prebuild compiled in the cache ("N from cache" in its log)
#   merge     one job without a GPU: `tune merge` of the N shards
#
#   deploy/slurm/tune-array.sh N RUN_DIR TUNE_ARGS...
#   deploy/slurm/tune-array.sh 8 /shared/tune/transpose --op transpose --shapes shapes.txt
#   STAGES=prebuild,shards,merge TUNE_ARCH=sm_90 PREBUILD_TASKS=32 \
#       deploy/slurm/tune-array.sh 8 /shared/tune/transpose --op transpose --shapes shapes.txt
#
# Run it on a login node: it submits itself once per stage and prints one line per stage with
# its job id. RUN_DIR must be on a file system that every node sees: prebuild task K writes
# its compile-only CSVs to RUN_DIR/prebuild/shard-K, shard K writes RUN_DIR/shard-K, the merge
# writes RUN_DIR/merged (run CSVs, journals, best.csv), and the logs go to RUN_DIR/logs. Every
# shard must run on the same GPU model (the merge refuses to rank different models together):
# pin one with SBATCH_ARGS, and give the prebuild that model's architecture as TUNE_ARCH.
# A job whose stage before it failed is cancelled (--kill-on-invalid-dep=yes), not left
# pending.
#
# Environment:
#   STAGES          the stages to submit, in order (default shards,merge): prebuild,shards,merge
#                   | prebuild,shards | prebuild | shards,merge | shards | merge
#   TUNE            the tune binary, on the shared file system (default: tune on PATH)
#   TUNE_ARCH       the GPUs' architecture for the prebuild, e.g. sm_90 for H100 and H200
#                   (`nvidia-smi --query-gpu=compute_cap`: 9.0 is sm_90); needed by prebuild
#   PREBUILD_TASKS  the number of prebuild tasks (default N); any number covers the sweep
#   PREBUILD_ARGS   extra sbatch options for the prebuild tasks, e.g. "--partition=cpu"
#   PREBUILD_TUNE_ARGS  extra tune options of the prebuild tasks only, e.g. "--budget 1000" to
#                   compile more of a search's space than the first rounds a GPU run measures;
#                   an option named here replaces the same option of TUNE_ARGS in these tasks
#   PREBUILD_CPUS   cores of one prebuild task (default 8); PREBUILD_TIME its time limit
#                   (default 02:00:00)
#   SBATCH_ARGS     extra sbatch options for the shards, e.g. "--partition=gpu --constraint=h100"
#   MERGE_ARGS      extra sbatch options for the merge (default SBATCH_ARGS, so an --account or
#                   --partition the cluster requires reaches it too), e.g. "--partition=cpu";
#                   MERGE_ARGS= (set, empty) gives it none. PREBUILD_ARGS defaults to none:
#                   its CPU tasks belong elsewhere than where SBATCH_ARGS sends the GPU tasks
#   SHARD_CPUS      cores of one shard (default 8); SHARD_TIME its time limit (default 04:00:00)
#   ONLY            submit only these tasks (e.g. ONLY=3,5) of the first array in STAGES after a
#                   failure, and the later stages whole: shards resume from their journals,
#                   prebuild tasks find what was compiled already in the cache
#   CUDA_AUTOTUNE_CACHE  the cubin cache (default RUN_DIR/cache), shared by every task
set -euo pipefail

tune=${TUNE:-tune}

case "${TUNE_ROLE:-}" in
prebuild)
    # Inside prebuild task K of P: compile this task's share of the sweep for the GPUs'
    # architecture into the shared cache. Its CSVs say what it compiled.
    p=$1 run_dir=$2
    shift 2
    k=$SLURM_ARRAY_TASK_ID
    # An option of PREBUILD_TUNE_ARGS replaces the same option of TUNE_ARGS (every occurrence,
    # with its value) rather than being refused: tune takes most options once, and the point
    # of PREBUILD_TUNE_ARGS is another value for these tasks than the GPU tasks get (a larger
    # --budget than TUNE_ARGS' own). An option takes a value where PREBUILD_TUNE_ARGS writes
    # one after it (--budget 1000 or --budget=1000).
    read -ra extra <<<"${PREBUILD_TUNE_ARGS:-}"
    declare -A replaced=()
    for ((i = 0; i < ${#extra[@]}; i++)); do
        opt=${extra[i]}
        [[ "$opt" == --* ]] || continue
        if [[ "$opt" == *=* ]] || { ((i + 1 < ${#extra[@]})) && [[ "${extra[i + 1]}" != -* ]]; }; then
            replaced[${opt%%=*}]=value
        else
            replaced[$opt]=flag
        fi
    done
    args=()
    while (($#)); do
        opt=$1
        shift
        key=${opt%%=*}
        if [[ -n "$key" && -n "${replaced[$key]:-}" ]]; then
            if [[ "$opt" != *=* && "${replaced[$opt]}" == value ]] && (($#)); then
                shift
            fi
            continue
        fi
        args+=("$opt")
    done
    exec "$tune" "${args[@]}" "${extra[@]}" --compile-only --arch "$TUNE_ARCH" \
        --shard "$k/$p" --out "$run_dir/prebuild/shard-$k"
    ;;
shard)
    # Inside array task K. N comes from the command line, not SLURM_ARRAY_TASK_COUNT, which
    # counts only the tasks of this submission (1 when ONLY resubmits one).
    n=$1 run_dir=$2
    shift 2
    k=$SLURM_ARRAY_TASK_ID
    # --resume: a requeued or resubmitted task reuses what its journal already holds.
    exec "$tune" "$@" --shard "$k/$n" --out "$run_dir/shard-$k" --resume
    ;;
merge)
    n=$1 run_dir=$2
    dirs=()
    for ((k = 0; k < n; k++)); do
        dirs+=("$run_dir/shard-$k")
    done
    exec "$tune" merge "${dirs[@]}" --out "$run_dir/merged"
    ;;
"") ;;
*)
    echo "error: TUNE_ROLE must be prebuild, shard or merge (set by this script), got '$TUNE_ROLE'" >&2
    exit 2
    ;;
esac

# On the login node: check everything, then submit the stages.
usage="usage: $0 N RUN_DIR TUNE_ARGS...   (e.g. $0 8 /shared/tune/run --op transpose --shapes shapes.txt)"
stages=${STAGES:-shards,merge}
case "$stages" in
prebuild,shards,merge | prebuild,shards | prebuild | shards,merge | shards | merge) ;;
*)
    echo "error: STAGES must be prebuild,shards,merge, prebuild,shards, prebuild, shards,merge, shards or merge, got '$stages'" >&2
    exit 2
    ;;
esac
has() { [[ ",$stages," == *",$1,"* ]]; }
# Only the merge runs without tune arguments.
if (($# < 2)) || { [[ "$stages" != merge ]] && (($# < 3)); }; then
    echo "$usage" >&2
    exit 2
fi
n=$1 run_dir=$2
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: N must be a positive number, got '$n'" >&2
    exit 2
fi
p=${PREBUILD_TASKS:-$n}
if has prebuild; then
    if ! [[ "$p" =~ ^[1-9][0-9]*$ ]]; then
        echo "error: PREBUILD_TASKS must be a positive number, got '$p'" >&2
        exit 2
    fi
    if ! [[ "${TUNE_ARCH:-}" =~ ^sm_[0-9]+a?$ ]]; then
        echo "error: the prebuild needs TUNE_ARCH, the GPUs' architecture such as sm_90 (got '${TUNE_ARCH:-}')" >&2
        exit 2
    fi
fi
if [[ -n "${ONLY:-}" && "$stages" == merge ]]; then
    echo "error: ONLY selects tasks of an array; STAGES=merge has none" >&2
    exit 2
fi
# The tasks add --shard, --out and --resume themselves: given twice, every task would fail.
for arg in "${@:3}"; do
    case "$arg" in
    --out | --out=* | --shard | --shard=* | --resume)
        echo "error: TUNE_ARGS may not hold ${arg%%=*}: each task sets --shard K/N, --out RUN_DIR/shard-K (prebuild: RUN_DIR/prebuild/shard-K) and --resume itself" >&2
        exit 2
        ;;
    esac
done
# The prebuild tasks add --compile-only and --arch TUNE_ARCH themselves; in TUNE_ARGS they
# would be given twice there, and make every GPU task compile only, or compile for another
# architecture than the one whose cubins the prebuild put in the cache.
if has prebuild; then
    for arg in "${@:3}"; do
        case "$arg" in
        --compile-only | --arch | --arch=*)
            echo "error: with the prebuild, TUNE_ARGS may not hold ${arg%%=*}: the prebuild tasks compile for TUNE_ARCH themselves (set it there) and each GPU task for its own GPU" >&2
            exit 2
            ;;
        esac
    done
fi
read -ra extra <<<"${PREBUILD_TUNE_ARGS:-}"
for arg in "${extra[@]}"; do
    case "$arg" in
    --compile-only | --arch | --arch=* | --out | --out=* | --shard | --shard=*)
        echo "error: PREBUILD_TUNE_ARGS may not hold ${arg%%=*}: each prebuild task sets --compile-only, --arch TUNE_ARCH, --shard K/P and --out RUN_DIR/prebuild/shard-K itself" >&2
        exit 2
        ;;
    esac
done
# ONLY: task numbers and ranges (3,5 or 0-3,7) of the first array submitted.
if [[ -n "${ONLY:-}" ]]; then
    first=$n
    has prebuild && first=$p
    IFS=, read -ra picks <<<"$ONLY"
    for pick in "${picks[@]}"; do
        if ! [[ "$pick" =~ ^([0-9]+)(-([0-9]+))?$ ]] || ((10#${BASH_REMATCH[1]} >= first)) ||
            { [[ -n "${BASH_REMATCH[3]}" ]] && ((10#${BASH_REMATCH[3]} >= first || 10#${BASH_REMATCH[3]} < 10#${BASH_REMATCH[1]})); }; then
            echo "error: ONLY lists tasks of an array of $first (0 to $((first - 1)), e.g. ONLY=3,5 or ONLY=0-2), got '$ONLY'" >&2
            exit 2
        fi
    done
fi
mkdir -p "$run_dir/logs"
run_dir=$(cd "$run_dir" && pwd)
# sbatch expands % in --output (%A, %a, %j): a % of the folder's own name is written %%.
logs=${run_dir//%/%%}/logs
# Every task of every stage reads and writes the same cache (sbatch --export=ALL passes it).
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-$run_dir/cache}
export TUNE_ARCH=${TUNE_ARCH:-}
export PREBUILD_TUNE_ARGS=${PREBUILD_TUNE_ARGS:-}

# ONLY narrows the first array submitted; the stages after it are submitted whole.
only=${ONLY:-}
# Sets `array`, the tasks to submit of an array of $1 tasks.
tasks() {
    if [[ -n "$only" ]]; then
        array=$only
        only=
    else
        array=0-$(($1 - 1))
    fi
}
# The resources are given here, not as #SBATCH lines, because the stages (this same script)
# need different ones.
after=()
queued='' ids=''
# `submit STAGE SBATCH_OPTIONS...` sets `job`. Where sbatch refuses a stage (an option the
# cluster requires missing from that stage's options), the stages queued before it would run
# for nothing: one line names them and how to cancel them.
submit() {
    local stage=$1
    shift
    if ! job=$(sbatch --parsable "$@"); then
        if [[ -n "$ids" ]]; then
            echo "error: sbatch refused the $stage job (its message above); already queued: $queued; cancel them with: scancel $ids" >&2
        else
            echo "error: sbatch refused the $stage job (its message above); nothing was queued" >&2
        fi
        exit 1
    fi
    job=${job%%;*}
    queued="${queued:+$queued, }$stage job $job"
    ids="${ids:+$ids }$job"
}
if has prebuild; then
    tasks "$p"
    # shellcheck disable=SC2086  # PREBUILD_ARGS holds several options
    submit prebuild --export=ALL,TUNE_ROLE=prebuild --array="$array" \
        --cpus-per-task="${PREBUILD_CPUS:-8}" --time="${PREBUILD_TIME:-02:00:00}" ${PREBUILD_ARGS:-} \
        --job-name=tune-prebuild --output="$logs/prebuild-%a-%A.out" \
        "$0" "$p" "$run_dir" "${@:3}"
    echo "prebuild: job array $job, tasks $array of 0-$((p - 1)) (CPU, compile-only for $TUNE_ARCH)"
    after=(--dependency="afterok:$job" --kill-on-invalid-dep=yes)
fi
if has shards; then
    tasks "$n"
    # shellcheck disable=SC2086  # SBATCH_ARGS holds several options
    submit shards --export=ALL,TUNE_ROLE=shard --array="$array" "${after[@]}" \
        --gres=gpu:1 --cpus-per-task="${SHARD_CPUS:-8}" --time="${SHARD_TIME:-04:00:00}" ${SBATCH_ARGS:-} \
        --job-name=tune-shard --output="$logs/shard-%a-%A.out" \
        "$0" "$n" "$run_dir" "${@:3}"
    echo "shards: job array $job, tasks $array of 0-$((n - 1)) (one GPU each)"
    after=(--dependency="afterok:$job" --kill-on-invalid-dep=yes)
fi
if has merge; then
    # MERGE_ARGS unset: SBATCH_ARGS; set (even empty): its own.
    # shellcheck disable=SC2086  # MERGE_ARGS holds several options
    submit merge --export=ALL,TUNE_ROLE=merge "${after[@]}" \
        --cpus-per-task=1 --time=00:30:00 ${MERGE_ARGS-${SBATCH_ARGS:-}} \
        --job-name=tune-merge --output="$logs/merge-%j.out" \
        "$0" "$n" "$run_dir"
    echo "merge: job $job"
fi
echo "cubin cache: $CUDA_AUTOTUNE_CACHE; merged results: $run_dir/merged; logs: $run_dir/logs"
