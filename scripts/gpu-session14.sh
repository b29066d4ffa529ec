#!/usr/bin/env bash
# Session 14 (issue 9): f16 8191^2, every RUNS=sector variant over TILE_DIM 64/128, the three
# ASPECTs, READ elem/chunk, BLOCK_ROWS 4-32 and OCCUPANCY 0/64 (exhaustive, the tool's table in
# $OUT/sweep.log), then Nsight Compute on memcpy-like copy_vec4, five transposes and the aligned
# 8192^2 control: L2 sectors and requests, DRAM and L2 throughput, instructions.
# Run on the GPU machine with .gpu/tune built from this tree; logs in $OUT (results/session14/).
set -u
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache
B="--param UNROLL=on --param CACHE=default --param PAD=1 --param VEC=1 --param TILES_PER_BLOCK=1"
.gpu/tune --op transpose --dtype f16 --shape 8191x8191 --strategy exhaustive $B --param RUNS=sector --param TILE_DIM=64,128 --param ASPECT=square,wide,tall --param READ=elem,chunk --param BLOCK_ROWS=4,8,16,32 --param OCCUPANCY=0,64 --param BOUNDS=edge --no-warm-start --out $OUT/sweep > $OUT/sweep.log 2>&1
sed -n '/^Baselines/,/^Best/p' $OUT/sweep.log | head -30
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
prof() { local name=$1 k=$2 shape=$3; shift 3; local a=(); for p in "$@"; do a+=(--param "$p"); done
  ncu --clock-control none -k "regex:^${k}\$" -c 1 --metrics "$metrics" .gpu/tune --op transpose --shape $shape --dtype f16 --reps 3 --warmup 1 --strategy exhaustive --no-warm-start --out /tmp/ncu-res "${a[@]}" > $OUT/ncu_$name.txt 2>&1
  echo "== $name"; grep -E "duration|sectors|requests|throughput|registers|warps_active|bytes" $OUT/ncu_$name.txt | awk '{print "   ", $1, $(NF)}'; }
C="UNROLL=on CACHE=default PAD=1 VEC=1 TILES_PER_BLOCK=1"
prof memcpy8191 'copy_vec4' 8191x8191 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=square RUNS=sector OCCUPANCY=64 READ=elem BOUNDS=edge $C
prof s64sq_elem transpose 8191x8191 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=square RUNS=sector OCCUPANCY=64 READ=elem BOUNDS=edge $C
prof s64wide_chunk transpose 8191x8191 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=wide RUNS=sector OCCUPANCY=64 READ=chunk BOUNDS=edge $C
prof s128sq_elem transpose 8191x8191 TILE_DIM=128 BLOCK_ROWS=8 ASPECT=square RUNS=sector OCCUPANCY=64 READ=elem BOUNDS=edge $C
prof s64tall_elem transpose 8191x8191 TILE_DIM=64 BLOCK_ROWS=4 ASPECT=tall RUNS=sector OCCUPANCY=64 READ=elem BOUNDS=edge $C
prof a64tall_tile transpose 8192x8192 TILE_DIM=64 BLOCK_ROWS=8 ASPECT=tall RUNS=tile OCCUPANCY=0 READ=elem BOUNDS=specialized $C
