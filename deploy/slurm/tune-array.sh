#!/usr/bin/env bash
# Tune a sweep on a Slurm cluster: a job array of N tasks, one GPU each, task K running
# `tune --shard K/N`, then one job that starts when every task succeeded and runs `tune merge`.
# Slurm does all the scheduling; nothing else runs between the jobs.
#
#   deploy/slurm/tune-array.sh N RUN_DIR TUNE_ARGS...
#   deploy/slurm/tune-array.sh 8 /shared/tune/transpose --op transpose --shapes shapes.txt
#
# Run it on a login node: it submits itself twice (the array with sbatch --array=0-(N-1), the
# merge with --dependency=afterok:<array job>) and prints the two job ids. RUN_DIR must be on a
# file system that every node sees: shard K writes RUN_DIR/shard-K, the merge writes
# RUN_DIR/merged (run CSVs, journals, best.csv). Every shard must run on the same GPU model
# (the merge refuses to rank different models together): pin one with SBATCH_ARGS.
#
# Environment:
#   TUNE         the tune binary, on the shared file system (default: tune on PATH)
#   SBATCH_ARGS  extra sbatch options for the shards, e.g. "--partition=gpu --constraint=h100"
#   SHARD_TIME   time limit of one shard (default 04:00:00)
#   ONLY         resubmit only these tasks (e.g. ONLY=3,5) after a failure; they resume from
#                their journals, and a new merge job waits for them
#   CUDA_AUTOTUNE_CACHE  the cubin cache (default RUN_DIR/cache, shared by the shards)
set -euo pipefail

tune=${TUNE:-tune}

if [[ "${TUNE_ROLE:-}" == shard ]]; then
    # Inside array task K. N comes from the command line, not SLURM_ARRAY_TASK_COUNT, which
    # counts only the tasks of this submission (1 when ONLY resubmits one).
    n=$1 run_dir=$2
    shift 2
    k=$SLURM_ARRAY_TASK_ID
    export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-$run_dir/cache}
    # --resume: a requeued or resubmitted task reuses what its journal already holds.
    exec "$tune" "$@" --shard "$k/$n" --out "$run_dir/shard-$k" --resume
fi

if [[ "${TUNE_ROLE:-}" == merge ]]; then
    n=$1 run_dir=$2
    dirs=()
    for ((k = 0; k < n; k++)); do
        dirs+=("$run_dir/shard-$k")
    done
    exec "$tune" merge "${dirs[@]}" --out "$run_dir/merged"
fi

# On the login node: submit the shards, then the merge.
if (($# < 3)); then
    echo "usage: $0 N RUN_DIR TUNE_ARGS...   (e.g. $0 8 /shared/tune/run --op transpose --shapes shapes.txt)" >&2
    exit 2
fi
n=$1 run_dir=$2
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: N must be a positive number, got '$n'" >&2
    exit 2
fi
mkdir -p "$run_dir/logs"
run_dir=$(cd "$run_dir" && pwd)
array=${ONLY:-0-$((n - 1))}
# The resources are given here, not as #SBATCH lines, because the merge job (this same
# script) needs no GPU.
# shellcheck disable=SC2086  # SBATCH_ARGS holds several options
shards=$(sbatch --parsable --export=ALL,TUNE_ROLE=shard --array="$array" \
    --gres=gpu:1 --cpus-per-task=8 --time="${SHARD_TIME:-04:00:00}" ${SBATCH_ARGS:-} \
    --job-name=tune-shard --output="$run_dir/logs/shard-%a-%A.out" \
    "$0" "$n" "$run_dir" "${@:3}")
shards=${shards%%;*}
merge=$(sbatch --parsable --export=ALL,TUNE_ROLE=merge --dependency="afterok:$shards" \
    --cpus-per-task=1 --time=00:30:00 \
    --job-name=tune-merge --output="$run_dir/logs/merge-%j.out" \
    "$0" "$n" "$run_dir")
merge=${merge%%;*}
echo "submitted: shards = job array $shards (tasks $array of 0-$((n - 1))), merge = job $merge"
echo "merged results: $run_dir/merged; logs: $run_dir/logs"
