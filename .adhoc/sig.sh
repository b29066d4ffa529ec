#!/usr/bin/env bash
# SIGTERM to every process of a GPU run (as Slurm does): exit 130, no variant failed by it.
T=.gpu/tune
d=$(mktemp -d)
for delay in 2 4; do
  rm -rf $d/o; CUDA_AUTOTUNE_CACHE=$d/c$delay setsid $T --op transpose --shape 8191x8191 --out $d/o > $d/out.txt 2> $d/err.txt &
  p=$!; sleep $delay
  kids=$(cat /proc/$p/task/$p/children 2>/dev/null)
  kill -TERM $p $kids; wait $p; rc=$?
  csv=$(ls $d/o/*.csv 2>/dev/null | head -1)
  died=$(grep -c "died" "$csv" 2>/dev/null); failed=$(grep -c ",failed," "$csv" 2>/dev/null)
  echo "sigterm-all delay=${delay}s kids=$(echo $kids | wc -w) rc=$rc died=$died failed=$failed"
  tail -2 $d/err.txt
done
