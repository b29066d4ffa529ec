// Prototype 3 (session 13, issue 9): TMA loads at odd strides (as tma_sector.cu), then the
// tile is moved once through shared memory into the transposed runs of `out`, each rotated so
// that 16-byte vector stores leave it aligned.
//
// tma_sector.cu showed that the two-byte stores of the write-out set the pace (84.5 % of memcpy
// even at the aligned 8192^2 in f16). With RUNS=sector every run a block writes to a row of
// `out` starts on a sector boundary: row c's run covers tile rows LEAD - s_c .. LEAD - s_c +
// TILE_H - 1 (s_c = (out row * ROWS + r0) mod SECTOR). So S, TILE_W rows of TILE_H elements (128
// bytes), holds row c's run from its first element: element (i, c) of the loaded rows goes to
// S[c][i - LEAD + s_c] (one two-byte load from the class box, one two-byte store; lanes along
// c), and the write-out is a 16-byte load of S and a 16-byte store per lane. S's 16-byte chunks
// are XOR-swizzled by c & 7, so neither the scattered stores nor the vector loads share banks.
//
// Result on the H100 (results/session13/h100_tma_vec.log): it verifies at every shape tried,
// but f16 8191^2 reaches 83.5 % of memcpy with one tile a block (76.8 / 77.3 % with 128 / 512
// threads), and fewer, longer blocks that load the next tile while moving this one lose more
// (2, 4, 8 tiles: 71.5, 69.5, 59.1 %). The same kernel at aligned shapes stays below the
// tuner's VEC=4 kernels too (f16 8192^2 85.5 % against 95.9 %, 4096^2 79.1 % against 99.1 %),
// so what holds it back is this kernel's shape (one thread issuing the copies, the wait, two
// barriers a tile, 30 registers), not the stride. f32 8191^2 85.8 %, f64 77.1 % (86.5 % with 8
// tiles a block); the tuner has 92.7 % and 93.4 %.
//
// PAIRS=1 (aligned f16 only) moves the tile as 2x2 blocks of 4-byte words, halving the shared-
// memory operations of the fill: no change (results/session13/h100_tma_vec_pairs.log: 8192^2
// 85.6 -> 86.0 %, 4096^2 78.3 -> 80.0 %, 6000^2 88.0 -> 88.7 %). So in this kernel the shared
// operations are not what holds it below the tuner either; the per-tile TMA structure is.
//
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 -o tmav tma_vec.cu -lcuda
// ./tmav ROWS COLS ELEM_BYTES [reps] [threads] [tiles per block] [pairs: 1 = 2x2 word moves, aligned f16 only]
#include "harness.cuh"

// TILE_W = TILE_H = 128 bytes of elements; LEAD = SECTOR rows above. A block transposes TPB
// tiles down one column of tiles, the next tile's boxes loading (stage k + 1 mod 2) while this
// one is moved.
template <int EB, int GI, int THREADS, int TPB, int PAIRS>
__global__ void __launch_bounds__(THREADS) tma_vec(const __grid_constant__ CUtensorMap tin,
                                                   typename bits<EB>::t* __restrict__ out,
                                                   const typename bits<EB>::t* __restrict__ in,
                                                   int rows, int cols)
{
    typedef typename bits<EB>::t T;
    constexpr int TILE_W = 128 / EB;
    constexpr int TILE_H = 128 / EB;
    constexpr int E = 16 / EB;
    constexpr int SECTOR = 32 / EB;
    constexpr int LEAD = SECTOR;
    constexpr int LOADED = TILE_H + LEAD;
    typedef ClassBoxes<EB, GI, LOADED> Boxes;
    constexpr int BOX_W = Boxes::W, BOX_STRIDE = Boxes::STRIDE;
    constexpr int STAGES = TPB > 1 ? 2 : 1;
    __shared__ alignas(128) unsigned char s_in[STAGES][GI * BOX_STRIDE];
    __shared__ alignas(128) unsigned char s_out[TILE_W * 128];
    __shared__ alignas(8) uint64_t bar[STAGES];
    const int c0 = blockIdx.x * TILE_W;
    const int tiles_y = (rows + TILE_H - 1) / TILE_H;
    const int ty0 = blockIdx.y * TPB;
    const int full_rows = (rows / GI) * GI;
    auto interior = [&](int ty) {
        const int r0 = ty * TILE_H;
        return r0 >= LEAD && r0 + TILE_H < rows && r0 + TILE_H <= full_rows && c0 + TILE_W + E <= cols;
    };
    auto issue = [&](int ty, int st) {
        const int r0 = ty * TILE_H;
        const uint32_t sb = (uint32_t)__cvta_generic_to_shared(&bar[st]);
        const uint32_t si = (uint32_t)__cvta_generic_to_shared(s_in[st]);
        fence_async_shared();
        Boxes::issue(si, &tin, cols, c0, r0 - LEAD, sb);
    };
    if (threadIdx.x == 0) {
#pragma unroll
        for (int st = 0; st < STAGES; ++st)
            mbar_init((uint32_t)__cvta_generic_to_shared(&bar[st]));
        fence_mbar_init();
        if (ty0 < tiles_y && interior(ty0)) issue(ty0, 0);
    }
    __syncthreads();
    constexpr int GROUPS = THREADS / TILE_W;
    const int c = threadIdx.x % TILE_W, g = threadIdx.x / TILE_W;
    unsigned char* srow = s_out + c * 128;
    constexpr int RUNS_PER_PASS = THREADS / 8;
    const int q = threadIdx.x & 7, c1 = threadIdx.x >> 3;
    unsigned phases = 0;
    for (int k = 0; k < TPB; ++k) {
        const int ty = ty0 + k;
        if (ty >= tiles_y) break;
        const int st = STAGES > 1 ? (k & 1) : 0;
        if (STAGES > 1 && threadIdx.x == 0 && k + 1 < TPB && ty + 1 < tiles_y && interior(ty + 1)) issue(ty + 1, st ^ 1);
        const int r0 = ty * TILE_H;
        if (!interior(ty)) {
            sector_tile_plain<T, SECTOR, TILE_W, TILE_H, THREADS>(out, in, rows, cols, r0, c0);
            continue;
        }
        const int s_c = (int)(((unsigned)(c0 + c) * (unsigned)rows + (unsigned)r0) & (SECTOR - 1));
        mbar_wait((uint32_t)__cvta_generic_to_shared(&bar[st]), (phases >> st) & 1);
        phases ^= 1u << st;
        if constexpr (PAIRS != 0) {
            // Aligned rows only (GI = 1, every s_c = 0 and SH = 0; the host checks): 2x2 blocks
            // moved as 4-byte words. A warp takes 8 column pairs x 4 row pairs, so its word
            // stores land in 4 words of 8 swizzled chunks (32 banks) and its loads too.
            static_assert(EB == 2, "pairs of 2-byte elements");
            const unsigned char* box0 = s_in[st];
            const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
            const int cp = lane & 7, rpl = lane >> 3;
#pragma unroll
            for (int t = 0; t < (TILE_W / 2) * (TILE_H / 2) / THREADS; ++t) {
                const int G = w + (THREADS / 32) * t;
                const int cg = G % (TILE_W / 16), rg = G / (TILE_W / 16);
                const int cpair = cg * 8 + cp, p = 2 * (rg * 4 + rpl);
                const int cA = 2 * cpair, i = LEAD + p;
                const uint32_t v0 = *reinterpret_cast<const uint32_t*>(box0 + (i * BOX_W + cA) * 2);
                const uint32_t v1 = *reinterpret_cast<const uint32_t*>(box0 + ((i + 1) * BOX_W + cA) * 2);
                const int byte = p * 2;
                const int sw = (cA >> 1) & 7;
                const int off = ((((byte >> 4) ^ sw) << 4) | (byte & 15));
                *reinterpret_cast<uint32_t*>(s_out + cA * 128 + off) = __byte_perm(v0, v1, 0x5410);
                *reinterpret_cast<uint32_t*>(s_out + (cA + 1) * 128 + off) = __byte_perm(v0, v1, 0x7632);
            }
        } else {
            // Fill S: element (i, c) -> S[c][p], p = i - LEAD + s_c, where 0 <= p < TILE_H.
            const unsigned char* box0 = s_in[st];
#pragma unroll
            for (int t = 0; t < (LOADED + GROUPS - 1) / GROUPS; ++t) {
                const int i = g + t * GROUPS;
                const int p = i - LEAD + s_c;
                if ((LOADED % GROUPS == 0 || i < LOADED) && p >= 0 && p < TILE_H) {
                    const int a = i & (GI - 1), jr = i / GI;
                    const int sh = (a * cols + c0) & (E - 1);
                    const T v = *(reinterpret_cast<const T*>(box0 + a * BOX_STRIDE) + jr * BOX_W + sh + c);
                    const int byte = p * EB;
                    *reinterpret_cast<T*>(srow + ((((byte >> 4) ^ (c & 7)) << 4) | (byte & 15))) = v;
                }
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TILE_W; j += RUNS_PER_PASS) {
            const int cc = c1 + j;
            if (RUNS_PER_PASS > TILE_W && cc >= TILE_W) break;
            const int oy = c0 + cc;
            const int s = (int)(((unsigned)oy * (unsigned)rows + (unsigned)r0) & (SECTOR - 1));
            const uint4 v = *reinterpret_cast<const uint4*>(s_out + cc * 128 + ((q ^ (PAIRS ? (cc >> 1) & 7 : cc & 7)) << 4));
            *reinterpret_cast<uint4*>(out + ((long long)oy * rows + r0 - s + q * E)) = v;
        }
        __syncthreads();
    }
}

template <int EB, int GI, int THREADS, int TPB, int PAIRS = 0>
static void launch(dim3 grid, const CUtensorMap& ti, void* out, const void* in, int rows, int cols)
{
    typedef typename bits<EB>::t T;
    grid.y = (grid.y + TPB - 1) / TPB;
    tma_vec<EB, GI, THREADS, TPB, PAIRS><<<grid, THREADS>>>(ti, (T*)out, (const T*)in, rows, cols);
}
typedef void (*launcher)(dim3, const CUtensorMap&, void*, const void*, int, int);

template <int EB, int THREADS, int TPB>
static launcher pick1(int gi)
{
    if (gi == 1) return launch<EB, 1, THREADS, TPB>;
    if (gi == 2) return launch<EB, 2, THREADS, TPB>;
    if (gi == 4 && EB <= 4) return launch<EB, (EB <= 4 ? 4 : 1), THREADS, TPB>;
    if (gi == 8 && EB == 2) return launch<EB, (EB == 2 ? 8 : 1), THREADS, TPB>;
    return nullptr;
}
template <int EB, int THREADS>
static launcher pick(int gi, int tpb)
{
    if (tpb == 1) return pick1<EB, THREADS, 1>(gi);
    if (tpb == 2) return pick1<EB, THREADS, 2>(gi);
    if (tpb == 4) return pick1<EB, THREADS, 4>(gi);
    if (tpb == 8) return pick1<EB, THREADS, 8>(gi);
    if (tpb == 16) return pick1<EB, THREADS, 16>(gi);
    return nullptr;
}

int main(int argc, char** argv)
{
    const int rows = atoi(argv[1]), cols = atoi(argv[2]), eb = atoi(argv[3]);
    const int reps = argc > 4 ? atoi(argv[4]) : 20;
    const int threads = argc > 5 ? atoi(argv[5]) : 256;
    const int tpb = argc > 6 ? atoi(argv[6]) : 1;
    const int th = 128 / eb;
    const int gi = row_group(cols, eb);
    Problem p(rows, cols, eb);
    const int tile_w = 128 / eb;
    CUtensorMap m = class_box_map(p.din, rows, cols, eb, gi, th + 32 / eb);
    dim3 grid((cols + tile_w - 1) / tile_w, (rows + th - 1) / th);
    launcher f = nullptr;
    if (eb == 2) f = threads == 512 ? pick<2, 512>(gi, tpb) : threads == 128 ? pick<2, 128>(gi, tpb) : pick<2, 256>(gi, tpb);
    if (eb == 4) f = threads == 512 ? pick<4, 512>(gi, tpb) : threads == 128 ? pick<4, 128>(gi, tpb) : pick<4, 256>(gi, tpb);
    if (eb == 8) f = threads == 512 ? pick<8, 512>(gi, tpb) : threads == 128 ? pick<8, 128>(gi, tpb) : pick<8, 256>(gi, tpb);
    const int pairs = argc > 7 ? atoi(argv[7]) : 0;
    if (pairs) {
        // 2x2 word moves: only where every row is aligned (gi = 1) and runs need no skew.
        f = nullptr;
        if (eb == 2 && gi == 1 && (rows * eb) % 32 == 0 && tpb == 1) f = threads == 512 ? launch<2, 1, 512, 1, 1> : launch<2, 1, 256, 1, 1>;
    }
    if (!f) { printf("no kernel for eb=%d gi=%d threads=%d tpb=%d pairs=%d\n", eb, gi, threads, tpb, pairs); return 1; }
    auto run = [&] { f(grid, m, p.dout, p.din, rows, cols); };
    const size_t bad = p.verify(run);
    double mk, mc;
    p.time(run, reps, &mk, &mc);
    printf("%dx%d eb=%d gi=%d tile %dx%d threads=%d tpb=%d pairs=%d: ", rows, cols, eb, gi, th, tile_w, threads, tpb, pairs);
    p.report("tma_vec", bad, mk, mc);
    return bad ? 1 : 0;
}
