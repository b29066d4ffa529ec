// Prototype (session 16, issue 9): f16 transpose at odd strides with every global access a
// 16-byte vector, to test whether 16-byte runs of `out` aligned to AE elements get f16 at
// 8191^2 past the tuner's 85 % of memcpy.
//
// Block (bx, by) owns input columns C0 .. C0 + W - 1 (rows of out) and, in each such row j of
// out, the H elements from r_j = R0 + phase_j, where phase_j in [0, AE) puts r_j on an AE-element
// boundary of the flat `out` (so every 8-element chunk it stores is 16-byte aligned and every
// AE-element run is written by one block). It needs input rows R0 .. R0 + H + AE - 2.
//  - Loads: each needed input row is read as the aligned 16-byte chunks that hold its W
//    columns (W / 8 + 1 of them at an odd stride) and stored as they are into a shared row,
//    chunk q at slot (q + i / 8) mod NQ (the rotation spreads rows 8 apart over banks). So
//    element (i, c) sits at position s_i + c of shared row i, s_i = ((R0 + i) * cols + C0) mod 8.
//  - Stores: one lane per 8-element chunk of a run: 8 two-byte shared loads down the column,
//    packed, one 16-byte store (VS = 8), or the 8 elements stored one by one (VS = 1).
// The block of tile row 0 also writes the head of each row (elements 0 .. phase_j - 1); chunks
// past the last row are written element by element.
//
// MODE 0 is the transpose; MODE 1 only writes (the same stores of a constant, no loads) and
// MODE 2 only loads (the same loads, one word stored a block): the two halves of its traffic.
//
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 -o ct chunk_transpose.cu -lcuda
// ./ct ROWS COLS [reps]
#include "harness.cuh"

template <int W, int H, int AE, int VS, int MODE, int LM, int THREADS>
__global__ void __launch_bounds__(THREADS) chunk_transpose(uint16_t* __restrict__ out, const uint16_t* __restrict__ in,
                                                          int rows, int cols)
{
    constexpr int NQ = W / 8 + 1;
    constexpr int HS = H + AE - 1;
    constexpr int KH = H / 8;
    __shared__ alignas(16) uint4 s[HS * NQ];
    const int C0 = blockIdx.x * W, R0 = blockIdx.y * H;
    const int wv = min(W, cols - C0);
    const long long total = (long long)rows * cols;
    const int cm = cols & 7;

    if (MODE != 1) {
        // Every load of the thread is issued before the first is stored (LM = 0: through
        // registers; LM = 1: cp.async, 16 bytes each), so a thread keeps NL loads in flight.
        constexpr int NL = (HS * NQ + THREADS - 1) / THREADS;
        uint4 v[NL];
        int dst[NL];
#pragma unroll
        for (int n = 0; n < NL; ++n) {
            const int idx = threadIdx.x + n * THREADS;
            const int i = idx / NQ, q = idx - i * NQ;
            const int r = R0 + i;
            dst[n] = -1;
            if (idx >= HS * NQ || r >= rows) continue;
            const long long e = (long long)r * cols + C0;
            const long long g = (e & ~7LL) + 8 * q;
            if (g >= e + wv) continue;
            dst[n] = i * NQ + (q + (i >> 3)) % NQ;
            if (LM == 1) {
                const int bytes = g + 8 <= total ? 16 : (int)(total - g) * 2;
                const uint32_t sa = (uint32_t)__cvta_generic_to_shared(&s[dst[n]]);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(sa), "l"(in + g), "r"(bytes) : "memory");
            } else if (g + 8 <= total) {
                v[n] = __ldg(reinterpret_cast<const uint4*>(in + g));
            } else {
                uint16_t t[8];
#pragma unroll
                for (int k = 0; k < 8; ++k) t[k] = g + k < total ? in[g + k] : 0;
                memcpy(&v[n], t, 16);
            }
        }
        if (LM == 1) {
            asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
        } else {
#pragma unroll
            for (int n = 0; n < NL; ++n)
                if (dst[n] >= 0) s[dst[n]] = v[n];
        }
        __syncthreads();
    }
    if (MODE == 2) {
        if (threadIdx.x == 0) out[(long long)blockIdx.y * gridDim.x + blockIdx.x] = reinterpret_cast<const uint16_t*>(s)[(R0 + C0) % (HS * NQ * 8)];
        return;
    }
    const unsigned char* sb = reinterpret_cast<const unsigned char*>(s);
    // Element (i, c) of the loaded rows, given s_i.
    auto elem = [&](int i, int si, int c) -> uint16_t {
        if (MODE == 1) return (uint16_t)(i ^ c);
        const int pos = si + c;
        const int slot = ((pos >> 3) + (i >> 3)) % NQ;
        return *reinterpret_cast<const uint16_t*>(sb + (i * NQ + slot) * 16 + (pos & 7) * 2);
    };
    for (int idx = threadIdx.x; idx < W * KH; idx += THREADS) {
        const int jl = idx / KH, k = idx - jl * KH;
        if (jl >= wv) break;
        const long long j = C0 + jl;
        const int p = (int)((j * rows + R0) % AE);
        const int phase = p ? AE - p : 0;
        const int i0 = phase + 8 * k;
        const int r = R0 + i0;
        if (r >= rows) continue;
        const int s0 = (int)(((long long)(R0 + i0) * cols + C0) & 7);
        uint16_t* o = out + j * rows + r;
        if (VS == 8 && r + 8 <= rows) {
            uint16_t t[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) t[u] = elem(i0 + u, (s0 + u * cm) & 7, jl);
            uint4 v;
            memcpy(&v, t, 16);
            *reinterpret_cast<uint4*>(o) = v;
        } else {
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (r + u < rows) o[u] = elem(i0 + u, (s0 + u * cm) & 7, jl);
        }
    }
    if (R0 == 0) {
        // The head of each row of out: elements 0 .. phase_j - 1, owned by no chunk.
        for (int idx = threadIdx.x; idx < W * AE; idx += THREADS) {
            const int jl = idx / AE, u = idx - jl * AE;
            if (jl >= wv) break;
            const long long j = C0 + jl;
            const int p = (int)((j * rows) % AE);
            const int phase = p ? AE - p : 0;
            if (u < phase && u < rows) out[j * rows + u] = elem(u, (int)(((long long)u * cols + C0) & 7), jl);
        }
    }
}

struct Config {
    const char* name;
    int w, h, ae, vs, mode, lm;
    void (*launch)(dim3, uint16_t*, const uint16_t*, int, int);
};

template <int W, int H, int AE, int VS, int MODE, int LM>
void launch(dim3 grid, uint16_t* out, const uint16_t* in, int rows, int cols)
{
    chunk_transpose<W, H, AE, VS, MODE, LM, 256><<<grid, 256>>>(out, in, rows, cols);
}

#define C(W, H, AE, VS, MODE, LM) {#W "x" #H " AE=" #AE " VS=" #VS " MODE=" #MODE " LM=" #LM, W, H, AE, VS, MODE, LM, launch<W, H, AE, VS, MODE, LM>}

static const Config configs[] = {
    C(64, 64, 16, 8, 0, 0),  C(64, 64, 16, 8, 0, 1),  C(128, 64, 16, 8, 0, 0),  C(128, 64, 16, 8, 0, 1),
    C(64, 128, 16, 8, 0, 0), C(64, 128, 16, 8, 0, 1), C(128, 128, 16, 8, 0, 0), C(128, 128, 16, 8, 0, 1),
    C(64, 64, 32, 8, 0, 1),  C(128, 32, 16, 8, 0, 1), C(256, 32, 16, 8, 0, 1),  C(256, 64, 16, 8, 0, 1),
    C(64, 64, 16, 8, 2, 0),  C(64, 64, 16, 8, 2, 1),  C(128, 64, 16, 8, 2, 1),  C(128, 128, 16, 8, 2, 1),
    C(64, 64, 16, 8, 1, 0),
};

int main(int argc, char** argv)
{
    if (argc < 3) { printf("usage: %s ROWS COLS [reps] [config-substring]\n", argv[0]); return 2; }
    const int rows = atoi(argv[1]), cols = atoi(argv[2]);
    const int reps = argc > 3 ? atoi(argv[3]) : 20;
    const char* only = argc > 4 ? argv[4] : nullptr;
    Problem p(rows, cols, 2);
    int failed = 0;
    for (const Config& c : configs) {
        if (only && !strstr(c.name, only)) continue;
        dim3 grid((cols + c.w - 1) / c.w, (rows + c.h - 1) / c.h);
        auto run = [&] { c.launch(grid, (uint16_t*)p.dout, (const uint16_t*)p.din, rows, cols); };
        size_t bad = 0;
        if (c.mode == 0) bad = p.verify(run);
        double mk, mc;
        p.time(run, reps, &mk, &mc);
        printf("%dx%d %-28s ", rows, cols, c.name);
        p.report(c.mode == 0 ? "chunk" : c.mode == 1 ? "write-only" : "read-only", bad, mk, mc);
        failed += bad != 0;
    }
    return failed ? 1 : 0;
}
