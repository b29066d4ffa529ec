// Prototype 1 (session 13, issue 9): a transpose whose tiles move through the bulk tensor copy
// engine (TMA) at odd strides. A TMA tensor map needs row strides that are multiples of 16
// bytes; 8191 f16 elements are 16382 bytes. But g consecutive rows (g = 16 / gcd(stride, 16))
// are g * stride bytes, a multiple of 16: the matrix viewed as "super-rows" of g rows is a
// legal 2D tensor, and a box at x = a * COLS + c0 in it holds rows a, a + g, a + 2g, ... of a
// tile. The idea was that g boxes load a whole tile and g boxes of the same view of `out`
// store it, at any alignment. Tiles that would wrap past a row's end take a plain path.
//
// Result on the H100 (results/session13/h100_tma_proto.log): it does not work at odd strides.
// A box whose innermost start coordinate is not a multiple of 16 bytes stops the kernel with
// "an illegal instruction was encountered" (8191x8191 f16; and at 8192x8192 with every box
// moved 1 element right, while a move of 8 elements, 16 bytes, runs). The map is accepted;
// only the copy faults. At aligned shapes (g = 1) it verifies: f16 8192^2 94.3-94.6 % of
// memcpy (the tuner's VEC=4 winner: 95.9 %), f32 8192^2 93.2 %, f16 4096^2 98.6 %.
// tma_sector.cu is the version that loads from aligned starts.
//
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 -o tma tma_transpose.cu -lcuda
// ./tma ROWS COLS ELEM_BYTES [reps]
#include "harness.cuh"

// Tile: TILE x TILE elements, TILE * EB = 128 bytes (one 128-byte swizzle row).
template <int EB, int GI, int GO, int THREADS>
__global__ void __launch_bounds__(THREADS) tma_transpose(const __grid_constant__ CUtensorMap tin,
                                                         const __grid_constant__ CUtensorMap tout,
                                                         typename bits<EB>::t* __restrict__ out,
                                                         const typename bits<EB>::t* __restrict__ in,
                                                         int rows, int cols, int in_full_rows, int out_full_rows, int xshift, int swz)
{
    typedef typename bits<EB>::t T;
    constexpr int TILE = 128 / EB;
    constexpr int E = 16 / EB;  // elements per 16-byte chunk
    __shared__ alignas(1024) unsigned char s_in[TILE * 128];
    __shared__ alignas(1024) unsigned char s_out[TILE * 128];
    __shared__ alignas(8) uint64_t bar;
    const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
    const bool interior = c0 + TILE <= cols && r0 + TILE <= in_full_rows && r0 + TILE <= rows
                          && c0 + TILE <= out_full_rows;
    if (!interior) {
        for (int i = threadIdx.x; i < TILE * TILE; i += THREADS) {
            const int x = i % TILE, y = i / TILE;  // out row c0 + y, out col r0 + x
            if (c0 + y < cols && r0 + x < rows) out[(long long)(c0 + y) * rows + r0 + x] = in[(long long)(r0 + x) * cols + c0 + y];
        }
        return;
    }
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(&bar);
    const uint32_t si = (uint32_t)__cvta_generic_to_shared(s_in);
    const uint32_t so = (uint32_t)__cvta_generic_to_shared(s_out);
    if (threadIdx.x == 0) {
        mbar_init(sb);
        fence_mbar_init();
        fence_async_shared();
        mbar_expect(sb, TILE * 128);
#pragma unroll
        for (int a = 0; a < GI; ++a) tma_load_2d(si + a * (TILE / GI) * 128, &tin, a * cols + c0 + xshift, r0 / GI, sb);
    }
    __syncthreads();
    mbar_wait(sb, 0);
    // s_in: box a (rows a, a+GI, ...): row j of it at a * (TILE/GI) * 128 + j * 128, chunk k of a
    // row swizzled to k ^ (row % 8) where row counts 128-byte rows from the 1024-byte atom.
    // Item = one 16-byte chunk of s_out: out-box b, its row j (out row c0 + b + GO * j), chunk J
    // (out cols r0 + J*E .. + E-1, i.e. in rows r0 + J*E + e).
    for (int it = threadIdx.x; it < TILE * TILE / E; it += THREADS) {
        // Lanes: j fastest (distinct swizzle chunks on the store), then b, then J.
        const int nb = GO, nj = TILE / GO;
        const int j = it % nj, b = (it / nj) % nb, J = it / (nj * nb);
        const int col = b + GO * j;
        union { uint4 v; T e[E]; } u;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int x = J * E + e;            // row of the tile
            const int a = x % GI, jr = x / GI;  // box, row within the box
            const int row = a * (TILE / GI) + jr;
            const int byte = col * EB;
            const int off = row * 128 + ((((byte >> 4) ^ (swz ? row & 7 : 0)) << 4) | (byte & 15));
            u.e[e] = *reinterpret_cast<const T*>(s_in + off);
        }
        const int orow = b * (TILE / GO) + j;
        const int ooff = orow * 128 + (((J ^ (swz ? orow & 7 : 0)) << 4));
        *reinterpret_cast<uint4*>(s_out + ooff) = u.v;
    }
    fence_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int b = 0; b < GO; ++b) tma_store_2d(&tout, b * rows + r0, c0 / GO, so + b * (TILE / GO) * 128);
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

// A 2D map of `ptr` (rows x cols, elem bytes eb) as super-rows of g rows; box TILE x TILE/g.
static CUtensorMap make_map(void* ptr, int rows, int cols, int eb, int g, int* full_rows, int swz)
{
    const int tile = 128 / eb;
    *full_rows = (rows / g) * g;
    return super_row_map(ptr, rows, cols, eb, g, tile, tile / g, swz ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
}

template <int EB, int GI, int GO, int THREADS>
static void launch(dim3 grid, const CUtensorMap& ti, const CUtensorMap& to, void* out, const void* in, int rows, int cols, int fi, int fo, int xs, int swz)
{
    typedef typename bits<EB>::t T;
    tma_transpose<EB, GI, GO, THREADS><<<grid, THREADS>>>(ti, to, (T*)out, (const T*)in, rows, cols, fi, fo, xs, swz);
}

typedef void (*launcher)(dim3, const CUtensorMap&, const CUtensorMap&, void*, const void*, int, int, int, int, int, int);

template <int EB, int THREADS>
static launcher pick(int gi, int go)
{
#define L(a, b) if (gi == a && go == b) return launch<EB, a, b, THREADS>;
    L(1, 1) L(1, 2) L(1, 4) L(1, 8) L(2, 1) L(2, 2) L(2, 4) L(2, 8) L(4, 1) L(4, 2) L(4, 4) L(4, 8) L(8, 1) L(8, 2) L(8, 4) L(8, 8)
#undef L
    return nullptr;
}

int main(int argc, char** argv)
{
    const int rows = atoi(argv[1]), cols = atoi(argv[2]), eb = atoi(argv[3]);
    const int reps = argc > 4 ? atoi(argv[4]) : 20;
    const int threads = argc > 5 ? atoi(argv[5]) : 128;
    const int swz = argc > 6 ? atoi(argv[6]) : 1;
    const int xs = argc > 7 ? atoi(argv[7]) : 0;
    const int gi = row_group(cols, eb), go = row_group(rows, eb);
    Problem p(rows, cols, eb);
    int fi, fo;
    CUtensorMap ti = make_map(p.din, rows, cols, eb, gi, &fi, swz);
    CUtensorMap to = make_map(p.dout, cols, rows, eb, go, &fo, swz);
    const int tile = 128 / eb;
    dim3 grid((cols + tile - 1) / tile, (rows + tile - 1) / tile);
    launcher f = nullptr;
    if (eb == 2) f = threads == 256 ? pick<2, 256>(gi, go) : pick<2, 128>(gi, go);
    if (eb == 4) f = threads == 256 ? pick<4, 256>(gi, go) : pick<4, 128>(gi, go);
    if (eb == 8) f = threads == 256 ? pick<8, 256>(gi, go) : pick<8, 128>(gi, go);
    auto run = [&] { f(grid, ti, to, p.dout, p.din, rows, cols, fi, fo, xs, swz); };
    const size_t bad = p.verify(run);
    double mk, mc;
    p.time(run, reps, &mk, &mc);
    printf("%dx%d eb=%d gi=%d go=%d threads=%d swz=%d xs=%d: ", rows, cols, eb, gi, go, threads, swz, xs);
    p.report("tma", bad, mk, mc);
    return bad ? 1 : 0;
}
