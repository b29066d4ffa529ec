// What the session-13 TMA prototypes share: error checks, element types, the super-row tensor
// map, the mbarrier / bulk-copy PTX, and the one way every prototype is run (random bytes in,
// one launch into a poisoned `out` compared element by element with the transpose, then the
// kernel and a device-to-device memcpy of the same bytes timed alternately, L2 flushed by a
// 256 MB memset before each, medians reported).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define CKD(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { const char* s; cuGetErrorString(e, &s); printf("CU %s at %d: %s\n", #x, __LINE__, s); exit(1);} } while (0)

template <int B> struct vec;
template <> struct vec<2> { typedef uint16_t t; };
template <> struct vec<4> { typedef uint32_t t; };
template <> struct vec<8> { typedef uint2 t; };
template <> struct vec<16> { typedef uint4 t; };
template <int EB> struct bits;
template <> struct bits<2> { typedef uint16_t t; };
template <> struct bits<4> { typedef uint32_t t; };
template <> struct bits<8> { typedef uint64_t t; };

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

// g: how many rows of `cols` elements of `eb` bytes make a multiple of 16 bytes.
static int row_group(int cols, int eb)
{
    const int rb = (cols * eb) % 16;
    return rb ? 16 / gcd(rb, 16) : 1;
}

// A 2D map of `ptr` (rows x cols, eb-byte elements) as super-rows of g rows: a legal tensor
// (stride g * cols * eb, a multiple of 16), box_w elements by box_rows super-rows a box.
static CUtensorMap super_row_map(void* ptr, int rows, int cols, int eb, int g, int box_w, int box_rows,
                                 CUtensorMapSwizzle swizzle)
{
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)g * cols, (cuuint64_t)(rows / g)};
    cuuint64_t strides[1] = {(cuuint64_t)g * cols * eb};
    cuuint32_t box[2] = {(cuuint32_t)box_w, (cuuint32_t)box_rows};
    cuuint32_t estr[2] = {1, 1};
    CUtensorMapDataType dt = eb == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : eb == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32 : CU_TENSOR_MAP_DATA_TYPE_INT64;
    CKD(cuTensorMapEncodeTiled(&m, dt, 2, ptr, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return m;
}

// --- Device side: shared-memory addresses are 32-bit (cvta'd) ---

__device__ __forceinline__ void mbar_init(uint32_t bar)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar));
}

// After the inits, before the barriers are used by the copy engine.
__device__ __forceinline__ void fence_mbar_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}

// Orders this thread's earlier shared-memory accesses before the copy engine's.
__device__ __forceinline__ void fence_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int x, int y, uint32_t src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(map), "r"(x), "r"(y), "r"(src) : "memory");
}

// The class boxes of tma_sector.cu and tma_vec.cu: LOADED rows of a tile 128 bytes of elements
// wide, as GI boxes, one per row class (rows a, a + GI, ... of the super-row map), each from
// the 16-byte aligned element at or below the class's first column and one 16-byte chunk wider,
// so every row of a class sits the same distance, (a * cols + c0) mod E, right of its box row's
// start. Box a is at byte a * STRIDE of the shared buffer.
template <int EB, int GI, int LOADED>
struct ClassBoxes {
    static constexpr int TILE_W = 128 / EB, E = 16 / EB;
    static constexpr int ROWS = LOADED / GI;         // box rows (super-rows) per box
    static constexpr int W = TILE_W + E;             // elements per box row
    static constexpr int BYTES = ROWS * W * EB;
    static constexpr int STRIDE = (BYTES + 127) / 128 * 128;

    // One thread: arms `bar` for the GI boxes of the tile whose loaded rows start at `top` (a
    // multiple of GI) and columns at c0, and starts their copies into `si`.
    __device__ static void issue(uint32_t si, const CUtensorMap* map, int cols, int c0, int top, uint32_t bar)
    {
        mbar_expect(bar, GI * BYTES);
#pragma unroll
        for (int a = 0; a < GI; ++a) tma_load_2d(si + a * STRIDE, map, (a * cols + c0) & ~(E - 1), top / GI, bar);
    }
};

// The map ClassBoxes reads: boxes of 128 / eb + 16 / eb elements by loaded / g super-rows.
static CUtensorMap class_box_map(void* ptr, int rows, int cols, int eb, int g, int loaded)
{
    return super_row_map(ptr, rows, cols, eb, g, 128 / eb + 16 / eb, loaded / g, CU_TENSOR_MAP_SWIZZLE_NONE);
}

// RUNS=sector ownership, element by element (tiles the copy engine cannot serve): out row oy's
// run from tile row r0 is columns r0 - s .. r0 - s + TILE_H - 1 (s = (oy * rows + r0) mod
// SECTOR); the last tile row also writes on to the end of the row.
template <typename T, int SECTOR, int TILE_W, int TILE_H, int THREADS>
__device__ __forceinline__ void sector_tile_plain(T* __restrict__ out, const T* __restrict__ in, int rows, int cols,
                                                  int r0, int c0)
{
    const bool last_row = r0 + TILE_H >= rows;
    for (int k = threadIdx.x; k < TILE_W * TILE_H; k += THREADS) {
        const int ox = k % TILE_H, oyi = k / TILE_H;
        const int oy = c0 + oyi;
        if (oy >= cols) continue;
        const int s = (int)(((long long)oy * rows + r0) & (SECTOR - 1));
        const int col = r0 - s + ox;
        if (col >= 0 && col < rows) out[(long long)oy * rows + col] = in[(long long)col * cols + oy];
        if (last_row && ox < s && col + TILE_H < rows)
            out[(long long)oy * rows + col + TILE_H] = in[(long long)(col + TILE_H) * cols + oy];
    }
}

// --- Host side: one problem, verified once, then timed against memcpy ---

struct Problem {
    int rows, cols, eb;
    size_t bytes;
    void *din, *dout, *dflush;
    static constexpr size_t flush_bytes = 256 << 20;
    std::vector<unsigned char> h;

    Problem(int rows_, int cols_, int eb_) : rows(rows_), cols(cols_), eb(eb_), bytes((size_t)rows_ * cols_ * eb_), h(bytes)
    {
        CKD(cuInit(0));
        CK(cudaFree(0));
        CK(cudaMalloc(&din, bytes));
        CK(cudaMalloc(&dout, bytes));
        CK(cudaMalloc(&dflush, flush_bytes));
        uint64_t s = 12345;
        for (size_t i = 0; i < bytes; ++i) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; h[i] = (unsigned char)(s >> 56); }
        CK(cudaMemcpy(din, h.data(), bytes, cudaMemcpyHostToDevice));
    }

    // Launches once into a poisoned `out` and counts the elements that are not the transpose's
    // (printing the first three).
    template <class Launch>
    size_t verify(Launch launch)
    {
        CK(cudaMemset(dout, 0xff, bytes));
        launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<unsigned char> o(bytes);
        CK(cudaMemcpy(o.data(), dout, bytes, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t r = 0; r < (size_t)rows; ++r)
            for (size_t c = 0; c < (size_t)cols; ++c)
                if (memcmp(&o[(c * rows + r) * eb], &h[(r * cols + c) * eb], eb)) { if (bad < 3) printf("bad at in(%zu,%zu)\n", r, c); ++bad; }
        return bad;
    }

    // Median milliseconds of the kernel and of memcpy, timed alternately `reps` times each.
    template <class Launch>
    void time(Launch launch, int reps, double* kernel_ms, double* memcpy_ms)
    {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<float> tk, tc;
        for (int i = 0; i < reps; ++i) {
            for (int which = 0; which < 2; ++which) {
                CK(cudaMemsetAsync(dflush, i & 0xff, flush_bytes));
                CK(cudaEventRecord(e0));
                if (which == 0) launch();
                else CK(cudaMemcpyAsync(dout, din, bytes, cudaMemcpyDeviceToDevice));
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                (which == 0 ? tk : tc).push_back(ms);
            }
        }
        std::sort(tk.begin(), tk.end());
        std::sort(tc.begin(), tc.end());
        *kernel_ms = tk[tk.size() / 2];
        *memcpy_ms = tc[tc.size() / 2];
    }

    // The common tail of every result line: verdict, times, bandwidths, fraction of memcpy.
    void report(const char* name, size_t bad, double mk, double mc) const
    {
        printf("%s (%zu bad)  %s %.4f ms %.0f GB/s  memcpy %.4f ms %.0f GB/s  => %.1f %% of memcpy\n",
               bad ? "WRONG" : "verified", bad, name, mk, 2.0 * bytes / mk / 1e6, mc, 2.0 * bytes / mc / 1e6, 100.0 * mc / mk);
    }
};
