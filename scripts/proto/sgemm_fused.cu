// Issue 10, session 14: does a repack fused into the GEMM kernel close the gap at odd shapes?
//
// At 999x1001x1003 (K and N odd) the repacked GEMM alone beats cuBLAS's kernel by ~6 %
// (session 9, Nsight Compute: 56.6 against 59.9 us), but the separate copy kernel and its launch
// cost ~7.5 us, so copy + GEMM reach only 92-94 % of cuBLAS, and the windowed kernels that read
// misaligned rows in place 95-97 %. Here the copy runs inside the GEMM kernel: every block first
// copies its share of A's and B's rows into the aligned, zero-padded scratch (AP, BP), all blocks
// meet at a grid barrier (a counter; the launch is cooperative, so the driver refuses a grid
// whose blocks cannot all be resident instead of letting it hang), then each block runs the
// tuner's GEMM on AP and BP. The copy's reads then overlap across the whole grid, no second
// launch is paid, and the GEMM's first loads hit L2.
//
// VARIANT is a source that `tune --op sgemm --emit DIR --param REPACK=1 ...` wrote (it holds the
// tuner's `sgemm_repack` and `sgemm` kernels and the device functions they use); this file adds
// the fused kernel and times, same run, L2 flushed before every launch (256 MB memset), medians:
//   cublas   cuBLAS SGEMM, FP32 (default math mode, TF32 off), row-major through C^T = B^T A^T
//   two      the tuner's REPACK=1 as it runs today: sgemm_repack then sgemm
//   gemm     sgemm alone on an AP/BP filled before (what the copy costs, by difference)
//   fused    the fused kernel, cooperative launch
//   pipe     the copy spread over the GEMM's slices instead of before it (sgemm_pipe, below)
// Every method's C is compared with a float64 CPU reference (relative error <= 1e-4 of the
// largest |C|), and a NaN-poisoned C before each checked launch catches unwritten elements.
//
// Measured on the H100 (session 14, `bash scripts/proto/gpu-fused.sh`, two rounds, logs in
// results/session14/h100_fused_barrier.log and h100_fused_pipe.log; every method verified at
// every tile): neither fusion pays. At 999x1001x1003, 64x64x32 TN=4 STAGES=3: cuBLAS 62.4 us,
// gemm alone 56.8 us (110 %), two 65.7 us (95 %), fused 66.9 us (93-94 %), pipe 51.5 %. The copy
// costs ~9-10 us in a kernel of its own and inside the GEMM alike: its 8 MB of writes evict
// dirty lines of the flushed L2, so it moves ~16 MB through DRAM, and no launch is saved that
// matters (likely: that the copy's writes evict dirty lines of the L2 the flush filled, so it
// moves ~16 MB through DRAM; not measured). The pipelined form loses half its speed, most
// likely to the per-slice chain of fence, atomic and acquire-poll by thread 0 that the block's
// other warps wait for at the slice barrier.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -DVARIANT='"v.cu"' -o fused sgemm_fused.cu -lcublas && ./fused 999 1001 1003 50
#include "sgemm_harness.cuh"

#include VARIANT


// The tuner's block swizzle (sgemm's GROUP_M walk): which tile of C this block computes.
__device__ __forceinline__ void block_of(int& bm, int& bn)
{
    const int pid = blockIdx.y * gridDim.x + blockIdx.x;
    const int group = GROUP_M * gridDim.x;
    const int first_m = (pid / group) * GROUP_M;
    const int rows_in_group = min((int)gridDim.y - first_m, GROUP_M);
    bm = first_m + (pid % group) % rows_in_group;
    bn = (pid % group) / rows_in_group;
}

// Waits until *counter reaches target (acquire: what was written before the matching adds is
// visible after); counts wrap, so the comparison is on the difference.
__device__ __forceinline__ void spin_until(const unsigned* counter, unsigned target)
{
    unsigned seen;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while ((int)(seen - target) < 0);
}

// Rows y < MA of the copy are A's (only when K % 4 != 0), the next KP rows B's. One warp per
// row at a time; each lane takes units (float4s of the destination) lane, lane + 32, ...; the
// four loads of UNROLL units are issued before their stores so that a warp has 4 * UNROLL
// loads in flight.
#define UNROLL 4
__device__ __forceinline__ void repack_rows(const float* __restrict__ A, const float* __restrict__ B, int M, int N,
                                            int K, float* __restrict__ AP, float* __restrict__ BP)
{
    const int kp4 = (K + 3) / 4, np4 = (N + 3) / 4;
    const long long ma = K % 4 ? M : 0;
    const long long rows = ma + 4LL * kp4;
    const int lane = threadIdx.x % 32;
    const long long warps = (long long)gridDim.x * gridDim.y * (blockDim.x / 32);
    const long long warp = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    for (long long y = warp; y < rows; y += warps) {
        const bool is_a = y < ma;
        const long long row = is_a ? y : y - ma;
        const int units = is_a ? kp4 : np4;
        const int width = is_a ? K : (row < K ? N : 0);
        const float* src = is_a ? A + row * K : B + row * N;
        float4* dst = reinterpret_cast<float4*>(is_a ? AP + row * 4 * kp4 : BP + row * 4 * np4);
        for (int u0 = lane; u0 < units; u0 += 32 * UNROLL) {
            float v[UNROLL][4];
#pragma unroll
            for (int i = 0; i < UNROLL; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int c = (u0 + i * 32) * 4 + j;
                    v[i][j] = c < width ? __ldg(src + c) : 0.0f;
                }
#pragma unroll
            for (int i = 0; i < UNROLL; ++i)
                if (u0 + i * 32 < units) dst[u0 + i * 32] = make_float4(v[i][0], v[i][1], v[i][2], v[i][3]);
        }
    }
}

// All blocks of the grid meet here. The counter only grows: a launch adds gridDim blocks, and
// a block waits until the count reaches the end of its own launch's round, so no reset is
// needed between launches (wraps after 2^32 / blocks launches).
__device__ __forceinline__ void grid_barrier(unsigned* counter)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned blocks = gridDim.x * gridDim.y;
        __threadfence();
        const unsigned old = atomicAdd(counter, 1u);
        const unsigned target = (old / blocks + 1) * blocks;
        spin_until(counter, target);
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_fused(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K,
            float* __restrict__ AP, float* __restrict__ BP, unsigned* counter)
{
    __shared__ __align__(16) float smem[SMEM_FLOATS];
    repack_rows(A, B, M, N, K, AP, BP);
    grid_barrier(counter);
    // From here on the tuner's sgemm (REPACK=1, WINDOWS=0), reading AP and BP.
    int bm, bn;
    block_of(bm, bn);
    const float* __restrict__ a = K % 4 ? AP : A;
    const int nb = (N + 3) / 4 * 4, kb = (K + 3) / 4 * 4;
    block_tile<!EVEN_TILES>(C, a, BP, M, nb, kb, N, (long long)bm * BM, 1, (long long)bn * BN, 0, smem);
}


// --- The pipelined variant: no grid barrier. The copy of slice s (BK columns of A, BK rows of
// B, padded) is split over every thread of the grid; counter[s] counts the blocks whose share
// of it is stored. Each block copies its share of slice s + P while the GEMM works on earlier
// slices (the loads go to registers one iteration before their stores), and before it issues
// the cp.async of slice s it waits until counter[s] holds every block of this launch. P =
// STAGES - 1 + LOOK slices are copied before the loop. Counters only grow (each launch adds
// one per block), so a launch's round comes from the first add. Blocks wait on each other, so
// all must be resident: cooperative launch.
#ifndef LOOK
#define LOOK 2
#endif
#define UPT 2 // float4 units a thread copies per slice, at most (the host checks)
struct CopyRegs {
    float v[UPT][4];
};

// Float4 unit i (of UPT) of this thread's share of slice s: A's units first (row, 4 columns of
// the slice's BK), then B's (one of the slice's BK rows, 4 of its padded columns). valid is
// false past the slice's units; row and col index A or B (and AP or BP, which have the same
// rows and columns, padded).
struct Unit {
    bool valid, is_a;
    long long row, col;
};
__device__ __forceinline__ Unit unit_of(int i, int M, int N, int s)
{
    const int np4 = (N + 3) / 4;
    const long long ua = (long long)M * (BK / 4), units = ua + (long long)BK * np4;
    const long long threads = (long long)gridDim.x * gridDim.y * THREADS;
    const long long u = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * THREADS + threadIdx.x + i * threads;
    if (u < ua) return {true, true, u / (BK / 4), (long long)s * BK + (u % (BK / 4)) * 4};
    const long long ub = u - ua;
    return {u < units, false, (long long)s * BK + ub / np4, (ub % np4) * 4};
}

__device__ __forceinline__ void copy_load(CopyRegs& r, const float* __restrict__ A, const float* __restrict__ B, int M,
                                          int N, int K, int s, int tiles)
{
    if (s >= tiles) return;
#pragma unroll
    for (int i = 0; i < UPT; ++i) {
        const Unit x = unit_of(i, M, N, s);
        const long long width = x.is_a ? K : (x.row < K ? N : 0), stride = x.is_a ? K : N;
        const float* src = x.is_a ? A : B;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            r.v[i][j] = x.valid && x.col + j < width ? __ldg(src + x.row * stride + x.col + j) : 0.0f;
    }
}

// Stores what copy_load read; units past AP's padded columns or BP's padded rows are dropped.
__device__ __forceinline__ void copy_store(const CopyRegs& r, float* __restrict__ AP, float* __restrict__ BP, int M,
                                           int N, int K, int s, int tiles)
{
    if (s >= tiles) return;
    const long long kp = (K + 3) / 4 * 4, np = (N + 3) / 4 * 4;
#pragma unroll
    for (int i = 0; i < UPT; ++i) {
        const Unit x = unit_of(i, M, N, s);
        if (!x.valid || (x.is_a ? x.col : x.row) >= kp) continue;
        float* dst = x.is_a ? AP + x.row * kp + x.col : BP + x.row * np + x.col;
        *reinterpret_cast<float4*>(dst) = make_float4(r.v[i][0], r.v[i][1], r.v[i][2], r.v[i][3]);
    }
}

// Thread 0: this block's share of slice s is stored (every thread passed a barrier since).
__device__ __forceinline__ unsigned signal(unsigned* counter, int s, int tiles)
{
    if (s >= tiles) return 0;
    __threadfence();
    return atomicAdd(counter + s, 1u);
}

__device__ __forceinline__ void wait_slice(const unsigned* counter, int s, int tiles, unsigned target)
{
    if (s < tiles) spin_until(counter + s, target);
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_pipe(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K,
           float* __restrict__ AP, float* __restrict__ BP, unsigned* counter)
{
    __shared__ __align__(16) float smem[SMEM_FLOATS];
    int bm, bn;
    block_of(bm, bn);
    const int nb = (N + 3) / 4 * 4, kb = (K + 3) / 4 * 4;
    const long long m0 = (long long)bm * BM, n0 = (long long)bn * BN;
    const int tiles = (kb + BK - 1) / BK;
    const unsigned blocks = gridDim.x * gridDim.y;
    constexpr int P = STAGES - 1 + LOOK;

    float (*As)[A_ROWS][A_LD] = reinterpret_cast<float (*)[A_ROWS][A_LD]>(smem);
    float (*Bs)[BK][B_LD] = reinterpret_cast<float (*)[BK][B_LD]>(smem + STAGES * A_ROWS * A_LD);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tx = (warp % (TX / WARP_N)) * WARP_N + lane % WARP_N;
    const int ty = (warp / (TX / WARP_N)) * WARP_M + lane / WARP_N;

    // Prologue: copy slices 0 .. P-1, signal them, wait for the first STAGES-1 and issue them.
    CopyRegs r;
#pragma unroll
    for (int s = 0; s < P; ++s) {
        copy_load(r, A, B, M, N, K, s, tiles);
        copy_store(r, AP, BP, M, N, K, s, tiles);
    }
    copy_load(r, A, B, M, N, K, P, tiles);
    __syncthreads();
    // Only thread 0 waits, so only it needs the round's target.
    unsigned target = 0;
    if (threadIdx.x == 0) {
        const unsigned old = signal(counter, 0, tiles);
        target = (old / blocks + 1) * blocks;
        for (int s = 1; s < P; ++s) signal(counter, s, tiles);
        for (int s = 0; s < STAGES - 1; ++s) wait_slice(counter, s, tiles, target);
    }
    __syncthreads();
    const float* __restrict__ a = K % 4 ? AP : A;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) issue_any<!EVEN_TILES>(As[s], Bs[s], a, BP, M, nb, kb, m0, 1, n0, 0, s);
        async_commit();
    }
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    for (int t = 0; t < tiles; ++t) {
        const int next = t + STAGES - 1;
        if (threadIdx.x == 0) {
            if (t > 0) signal(counter, P + t - 1, tiles);
            wait_slice(counter, next, tiles, target);
        }
        copy_store(r, AP, BP, M, N, K, P + t, tiles);
        copy_load(r, A, B, M, N, K, P + t + 1, tiles);
        async_wait<STAGES - 2>();
        __syncthreads();
        if (next < tiles) issue_any<!EVEN_TILES>(As[next % STAGES], Bs[next % STAGES], a, BP, M, nb, kb, m0, 1, n0, 0, next);
        async_commit();
        compute_slice(acc, As[t % STAGES], Bs[t % STAGES], ty, tx, 0);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const long long row = m0 + tile_row(i, ty);
        if (!EVEN_TILES && row >= M) continue;
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const long long col = n0 + c * TX * 4 + tx * 4;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (EVEN_TILES || col + j < N) C[row * N + col + j] = acc[i][c * 4 + j];
        }
    }
}

int main(int argc, char** argv)
{
    const int M = argc > 1 ? atoi(argv[1]) : 999, N = argc > 2 ? atoi(argv[2]) : 1001,
              K = argc > 3 ? atoi(argv[3]) : 1003, reps = argc > 4 ? atoi(argv[4]) : 50;
    const int kp = (K + 3) / 4 * 4, np = (N + 3) / 4 * 4;
    Problem p(M, N, K);
    float *AP, *BP;
    unsigned *counter, *counters;
    CK(cudaMalloc(&AP, (size_t)M * kp * 4));
    CK(cudaMalloc(&BP, (size_t)kp * np * 4));
    CK(cudaMalloc(&counter, 4));
    CK(cudaMemset(counter, 0, 4));
    CK(cudaMalloc(&counters, 4096 * 4));
    CK(cudaMemset(counters, 0, 4096 * 4));
    const dim3 block(THREADS), grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    const dim3 rblock(128), rgrid((std::max((K + 3) / 4, (N + 3) / 4) + 127) / 128,
                                  std::min((K % 4 ? M : 0) + (K + 3) / 4 * 4, 65535));
    {
        const long long units = (long long)M * (BK / 4) + (long long)BK * ((N + 3) / 4);
        if (units > UPT * (long long)grid.x * grid.y * THREADS || (kp + BK - 1) / BK > 4096) {
            printf("pipe: too many units per thread\n");
            return 1;
        }
    }
    int per_sm = 0, sms = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sgemm_fused, THREADS, 0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaFuncAttributes fa, ga, pa;
    CK(cudaFuncGetAttributes(&fa, sgemm_fused));
    CK(cudaFuncGetAttributes(&ga, sgemm));
    CK(cudaFuncGetAttributes(&pa, sgemm_pipe));
    printf("shape %dx%dx%d, tile %dx%dx%d, grid %u blocks of %d threads; fused: %d regs, %d blocks/SM x %d SMs; "
           "sgemm: %d regs; pipe: %d regs, LOOK %d\n",
           M, N, K, BM, BN, BK, grid.x * grid.y, THREADS, fa.numRegs, per_sm, sms, ga.numRegs, pa.numRegs, LOOK);

    float *C = p.C, *A = p.A, *B = p.B;
    int m = M, n = N, k = K;
    auto cooperative = [&](const void* kernel, unsigned* c) {
        void* args[] = {&C, &A, &B, &m, &n, &k, &AP, &BP, &c};
        CK(cudaLaunchCooperativeKernel(kernel, grid, block, args, 0, 0));
    };
    const std::vector<Method> methods = {
        p.cublas(),
        {"two", [&] {
             sgemm_repack<<<rgrid, rblock>>>(C, A, B, M, N, K, AP, BP);
             sgemm<<<grid, block>>>(C, A, B, M, N, K, AP, BP);
         }},
        {"gemm", [&] { sgemm<<<grid, block>>>(C, A, B, M, N, K, AP, BP); }},
        {"fused", [&] { cooperative((const void*)sgemm_fused, counter); }},
        {"pipe", [&] { cooperative((const void*)sgemm_pipe, counters); }},
    };
    // Check every method; the scratch is poisoned with NaN too before each one that copies, so
    // a copy that skips a row or the padding fails ("gemm" reads the last method's copies).
    for (const Method& meth : methods) {
        if (meth.name != "gemm") {
            CK(cudaMemset(AP, 0xff, (size_t)M * kp * 4));
            CK(cudaMemset(BP, 0xff, (size_t)kp * np * 4));
        }
        if (!p.verify(meth)) return 1;
    }
    p.time(methods, reps);
    return 0;
}
