// Session 9's rewrite of sgemm_repack (templates/sgemm.cu.tera, REPACK=1), measured and not
// kept: the same time as the copy it was meant to replace (Nsight Compute, H100, median of 3:
// 999x1001x1003 7.5 us both, 1023x1025x1027 7.6 vs 7.2 us, 2047x2049x2051 21.7 vs 21.3 us;
// results/session9/ncu/repack-*.txt). Its launch was grid.y = ceil_div(rows, 4) block rows.
// Kept as the record of what was tried; it is not compiled by anything.
#define REPACK_ROWS 4

extern "C" __global__ void __launch_bounds__(128)
sgemm_repack(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
             int M, int N, int K, float* __restrict__ AP, float* __restrict__ BP)
{
    const int kp4 = (K + 3) / 4, np4 = (N + 3) / 4;
    const long long ma = K % 4 ? M : 0, rows = ma + 4LL * kp4;
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    for (long long y0 = (long long)blockIdx.y * REPACK_ROWS; y0 < rows;
         y0 += (long long)gridDim.y * REPACK_ROWS) {
        const float* src[REPACK_ROWS];
        long long s[REPACK_ROWS];
        int n[REPACK_ROWS];
        bool fast[REPACK_ROWS];
        float4 lo[REPACK_ROWS], hi[REPACK_ROWS];
        // All eight float4 loads first (cuobjdump shows them issued back to back).
#pragma unroll
        for (int i = 0; i < REPACK_ROWS; ++i) {
            const long long y = y0 + i;
            const bool is_a = y < ma;
            const long long row = is_a ? y : y - ma;
            const int width = y >= rows ? 0 : is_a ? K : (row < K ? N : 0);
            src[i] = is_a ? A : B;
            s[i] = row * (is_a ? K : N) + u * 4;
            n[i] = min(4, width - u * 4);
            const long long end = is_a ? (long long)M * K : (long long)K * N;
            fast[i] = n[i] > 0 && (s[i] & ~3LL) + 8 <= end;
            if (fast[i]) {
                lo[i] = __ldg(reinterpret_cast<const float4*>(src[i] + (s[i] & ~3LL)));
                hi[i] = __ldg(reinterpret_cast<const float4*>(src[i] + (s[i] & ~3LL) + 4));
            }
        }
#pragma unroll
        for (int i = 0; i < REPACK_ROWS; ++i) {
            const long long y = y0 + i;
            if (y >= rows) break;
            const bool is_a = y < ma;
            if (u >= (is_a ? kp4 : np4)) continue;
            float f[4];
            if (fast[i]) {
                const float w[8] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w, hi[i].x, hi[i].y, hi[i].z, hi[i].w};
                const int off = (int)(s[i] & 3);
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    f[j] = off == 0 ? w[j] : off == 1 ? w[j + 1] : off == 2 ? w[j + 2] : w[j + 3];
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) f[j] = j < n[i] ? __ldg(src[i] + s[i] + j) : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (j >= n[i]) f[j] = 0.0f;
            float4* dst = reinterpret_cast<float4*>(is_a ? AP + y * 4 * kp4 : BP + (y - ma) * 4 * np4);
            dst[u] = make_float4(f[0], f[1], f[2], f[3]);
        }
    }
}
