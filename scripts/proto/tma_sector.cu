// Prototype 2 (session 13, issue 9): TMA loads at odd strides, RUNS=sector writes.
//
// Prototype 1 (tma_transpose.cu) showed that a TMA tile load faults (illegal instruction) when
// the box's innermost start coordinate is not 16-byte aligned, so boxes cannot start at an odd
// row's first element. But rows r and r + g (g = 16 / gcd(row bytes, 16)) share their
// alignment: in the view of the matrix as super-rows of g rows (a legal 2D tensor: its stride
// is a multiple of 16 bytes), class a's box (rows a, a + g, ...) can start at the aligned
// element below the tile's first column, one chunk (E elements) wider than the tile, and every
// row of it then sits SH_a = (a * COLS + c0) mod E elements right of where it would be aligned.
// So g boxes load the tile (plus the SECTOR rows above it that RUNS=sector writes need) with no
// per-element instruction; the write-out is the template's RUNS=sector path, reading element
// (i, c) at box i % g, row i / g, column SH + c.
//
// Result on the H100 (results/session13/h100_tma_proto.log): it verifies at every shape tried
// (8191^2 in f16, f32, f64; 999x1001, 2001x3003, 33x4097, 4097x33), but f16 at 8191^2 stays at
// 84.0-85.2 % of memcpy, where the tuner's RUNS=sector kernels already are, and the same kernel
// at the aligned 8192^2 reaches only 84.5 %: with no load instruction left at all, the two-byte
// stores of the sector write-out set the pace. Gathering VW = 2, 4, 8 elements of a run per
// lane for one wider store: 85.2, 76.5, 57.0 % (the gathered reads from the class boxes hit
// the same banks: every box row is 144 bytes, so rows step 4 banks). f32 88.5 % and f64
// 90.9 % (the tuner: 92.7 % and 93.4 %). A shape with fewer than g rows (7x5) is refused by
// cuTensorMapEncodeTiled (a dimension of 0); a real path would skip the map there.
//
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 -o tmas tma_sector.cu -lcuda
// ./tmas ROWS COLS ELEM_BYTES [reps] [tile_h] [threads] [elements per store]
#include "harness.cuh"

// TILE_W = 128 bytes of columns; TILE_H rows; LEAD = SECTOR rows above.
template <int EB, int GI, int TILE_H, int THREADS, int VW>
__global__ void __launch_bounds__(THREADS) tma_sector(const __grid_constant__ CUtensorMap tin,
                                                      typename bits<EB>::t* __restrict__ out,
                                                      const typename bits<EB>::t* __restrict__ in,
                                                      int rows, int cols)
{
    typedef typename bits<EB>::t T;
    constexpr int TILE_W = 128 / EB;
    constexpr int E = 16 / EB;
    constexpr int SECTOR = 32 / EB;
    constexpr int LEAD = SECTOR;
    typedef ClassBoxes<EB, GI, TILE_H + LEAD> Boxes;
    constexpr int BOX_W = Boxes::W, BOX_STRIDE = Boxes::STRIDE;
    __shared__ alignas(128) unsigned char s_in[GI * BOX_STRIDE];
    __shared__ alignas(8) uint64_t bar;
    const int r0 = blockIdx.y * TILE_H, c0 = blockIdx.x * TILE_W;
    const bool last_row = r0 + TILE_H >= rows;
    const bool interior = r0 >= LEAD && !last_row && r0 + TILE_H <= (rows / GI) * GI
                          && c0 + TILE_W + E <= cols;
    if (!interior) {
        // The same ownership as the fast path.
        sector_tile_plain<T, SECTOR, TILE_W, TILE_H, THREADS>(out, in, rows, cols, r0, c0);
        return;
    }
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(&bar);
    const uint32_t si = (uint32_t)__cvta_generic_to_shared(s_in);
    if (threadIdx.x == 0) {
        mbar_init(sb);
        fence_mbar_init();
        fence_async_shared();
        Boxes::issue(si, &tin, cols, c0, r0 - LEAD, sb);
    }
    __syncthreads();
    mbar_wait(sb, 0);
    // Write-out: lanes along the run (ox), VW elements each (one aligned VW * EB-byte store:
    // runs start on sector boundaries), OUT_ROWS rows of out per pass.
    constexpr int LANES_PER_RUN = TILE_H / VW;
    constexpr int OUT_ROWS = THREADS / LANES_PER_RUN;
    const int ox = (threadIdx.x % LANES_PER_RUN) * VW, oy0 = threadIdx.x / LANES_PER_RUN;
    unsigned s_bits = (unsigned)(c0 + oy0) * (unsigned)rows + (unsigned)r0;
    const unsigned s_step = (unsigned)OUT_ROWS * (unsigned)rows;
    T* dst = out + ((long long)(c0 + oy0) * rows + r0 + ox);
    const long long dst_step = (long long)OUT_ROWS * rows;
    typedef typename vec<VW * EB>::t V;
#pragma unroll
    for (int j = 0; j < TILE_W; j += OUT_ROWS) {
        const int s = (int)(s_bits & (SECTOR - 1));
        union { V v; T e[VW]; } u;
#pragma unroll
        for (int e = 0; e < VW; ++e) {
            const int i = LEAD - s + ox + e;            // row of the loaded rows (0 = r0 - LEAD)
            const int a = i & (GI - 1), jr = i / GI;
            const int sh = (a * cols + c0) & (E - 1);
            u.e[e] = *(reinterpret_cast<const T*>(s_in + a * BOX_STRIDE) + jr * BOX_W + sh + oy0 + j);
        }
        *reinterpret_cast<V*>(dst - s) = u.v;
        s_bits += s_step;
        dst += dst_step;
    }
}

template <int EB, int GI, int TH, int THREADS, int VW>
static void launch(dim3 grid, const CUtensorMap& ti, void* out, const void* in, int rows, int cols)
{
    typedef typename bits<EB>::t T;
    tma_sector<EB, GI, TH, THREADS, VW><<<grid, THREADS>>>(ti, (T*)out, (const T*)in, rows, cols);
}
typedef void (*launcher)(dim3, const CUtensorMap&, void*, const void*, int, int);

template <int EB, int TH, int THREADS, int VW>
static launcher pick1(int gi)
{
    if (gi == 1) return launch<EB, 1, TH, THREADS, VW>;
    if (gi == 2) return launch<EB, 2, TH, THREADS, VW>;
    if (gi == 4) return launch<EB, 4, TH, THREADS, VW>;
    if (gi == 8 && EB == 2) return launch<EB, 8, TH, THREADS, VW>;
    return nullptr;
}
template <int EB, int TH, int THREADS>
static launcher pick(int gi, int vw)
{
    if (vw == 1) return pick1<EB, TH, THREADS, 1>(gi);
    if (vw == 2) return pick1<EB, TH, THREADS, 2>(gi);
    if (vw == 4 && EB <= 4) return pick1<EB, TH, THREADS, (EB <= 4 ? 4 : 1)>(gi);
    if (vw == 8 && EB == 2) return pick1<EB, TH, THREADS, (EB == 2 ? 8 : 1)>(gi);
    return nullptr;
}

int main(int argc, char** argv)
{
    const int rows = atoi(argv[1]), cols = atoi(argv[2]), eb = atoi(argv[3]);
    const int reps = argc > 4 ? atoi(argv[4]) : 20;
    const int th = argc > 5 ? atoi(argv[5]) : 64;
    const int threads = argc > 6 ? atoi(argv[6]) : 256;
    const int vw = argc > 7 ? atoi(argv[7]) : 1;
    const int gi = row_group(cols, eb);
    Problem p(rows, cols, eb);
    const int tile_w = 128 / eb;
    CUtensorMap m = class_box_map(p.din, rows, cols, eb, gi, th + 32 / eb);
    dim3 grid((cols + tile_w - 1) / tile_w, (rows + th - 1) / th);
    launcher f = nullptr;
#define P(EBV) \
    if (eb == EBV) { \
        if (th == 64 && threads == 256) f = pick<EBV, 64, 256>(gi, vw); \
        if (th == 64 && threads == 128) f = pick<EBV, 64, 128>(gi, vw); \
        if (th == 128 && threads == 256) f = pick<EBV, 128, 256>(gi, vw); \
        if (th == 128 && threads == 512) f = pick<EBV, 128, 512>(gi, vw); \
        if (th == 32 && threads == 128) f = pick<EBV, 32, 128>(gi, vw); \
    }
    P(2) P(4) P(8)
    if (!f) { printf("no kernel for eb=%d gi=%d th=%d threads=%d vw=%d\n", eb, gi, th, threads, vw); return 1; }
    auto run = [&] { f(grid, m, p.dout, p.din, rows, cols); };
    const size_t bad = p.verify(run);
    double mk, mc;
    p.time(run, reps, &mk, &mc);
    printf("%dx%d eb=%d gi=%d tile %dx%d threads=%d vw=%d: ", rows, cols, eb, gi, th, tile_w, threads, vw);
    p.report("tma_sector", bad, mk, mc);
    return bad ? 1 : 0;
}
