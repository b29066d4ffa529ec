// Issue 10, session 14: do deeper cp.async rings help the windowed kernels at 999x1001x1003?
//
// The template declares its slice buffers as static shared memory, which a block may have only
// 48 KB of, so 64x64x32 windowed tiles stop at STAGES=2 (three stages need 50.7 KB). On the H100
// a block may opt in to 227 KB of dynamic shared memory. VARIANT is a windowed source rendered
// from a copy of the template whose `smem` is `extern __shared__` where it needs more than 48 KB
// and whose shared-memory constraint allows 227 KB (`bash scripts/proto/gpu-dsmem.sh render`).
// This file launches it with that much dynamic shared memory (cudaFuncSetAttribute) and times
// it against cuBLAS in the same run (sgemm_harness.cuh: verified, L2 flushed, medians).
//
// Measured on the H100 (`bash scripts/proto/gpu-dsmem.sh`, 10 tiles x STAGES 2-4, two rounds,
// results/session14/h100_dsmem.log; every kernel verified): deeper rings do not help. 64x64x32
// TN=4 WARP_N=16: STAGES=2 96.8-97.2 % of cuBLAS, 3 (50.7 KB, dynamic) 93.3-93.5 %, 4 95.2-95.5 %;
// the best of all 30 is 64x128x32 TN=4 STAGES=2 (50 KB, dynamic: a tile the 48 KB limit keeps out
// of the tuner's space) at 97.2-97.3 %, against 96.4-96.6 % for the stored 32x64x16 STAGES=3 tile
// in the same run.
// At 4096^3 (`render4096`: the stored winner's tile 64x128x16 TN=8 PAD=4 and six neighbours x
// STAGES 2-4, two rounds, results/session14/h100_dsmem_4096.log; checked against cuBLAS's FP32
// result, the CPU product being too slow there): 64x128x32 TN=8 PAD=0 STAGES=3 (72 KB, dynamic)
// 2831 us = 94.1 % of cuBLAS in both rounds, against 2860 us = 93.0 % for the stored winner's
// kernel: 1 % faster, from a tile the 48 KB limit keeps out of the space.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -DVARIANT='"v.cu"' -o dsmem sgemm_dsmem.cu -lcublas && ./dsmem 999 1001 1003 50
#include "sgemm_harness.cuh"

#include VARIANT

int main(int argc, char** argv)
{
    const int M = argc > 1 ? atoi(argv[1]) : 999, N = argc > 2 ? atoi(argv[2]) : 1001,
              K = argc > 3 ? atoi(argv[3]) : 1003, reps = argc > 4 ? atoi(argv[4]) : 50;
    Problem p(M, N, K);
    // The template's launch geometry (templates/sgemm.toml): with WINDOWS=1 and K % 4 != 0 the
    // block rows come in fours, one per alignment of A's rows.
    const int rows = WIN_K4 ? 4 * ((M + 4 * BM - 1) / (4 * BM)) : (M + BM - 1) / BM;
    const dim3 grid((N + BN - 1) / BN, rows), block(THREADS);
    const int smem = SMEM_FLOATS * 4 > 49152 ? SMEM_FLOATS * 4 : 0;
    if (smem) CK(cudaFuncSetAttribute(sgemm, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, sgemm));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sgemm, THREADS, smem));
    printf("shape %dx%dx%d, tile %dx%dx%d STAGES=%d, %u blocks of %d threads, %d regs, %d B shared (%s), %d blocks/SM\n",
           M, N, K, BM, BN, BK, STAGES, grid.x * grid.y, THREADS, fa.numRegs, SMEM_FLOATS * 4,
           smem ? "dynamic" : "static", per_sm);
    float* unused = p.A; // AP and BP: REPACK=0 kernels do not read them
    const Method kernel{"kernel", [&] { sgemm<<<grid, block, smem>>>(p.C, p.A, p.B, M, N, K, unused, unused); }};
    const Method roof = p.cublas();
    if (!p.verify(roof) || !p.verify(kernel)) return 1;
    p.time({roof, kernel}, reps);
    return 0;
}
