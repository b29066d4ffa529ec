// What the session-14 SGEMM prototypes share: a row-major M x N x K problem with random inputs,
// its float64 CPU reference (cuBLAS's FP32 result above 4e9 multiply-adds), cuBLAS SGEMM (FP32, default math mode: TF32 off) as the roof, a
// check of any launch against the reference (C poisoned with NaN first; relative error <= 1e-4
// of the largest |C|, as the tuner checks), and the timing loop: every method launched in turn,
// L2 flushed by a 256 MB memset before each launch, CUDA events, medians.
#pragma once
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define CB(x) do { cublasStatus_t e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %s at %d: %d\n", #x, __LINE__, (int)e); exit(1);} } while (0)

struct Method {
    std::string name;
    std::function<void()> launch; // enqueues the method's kernels on the default stream
};

struct Problem {
    int M, N, K;
    std::vector<float> ha, hb;
    std::vector<double> ref;
    double cmax = 0;
    float *A, *B, *C;
    char* flush;
    size_t flush_bytes = 256u << 20;
    cublasHandle_t h;

    Problem(int m, int n, int k) : M(m), N(n), K(k), ha((size_t)m * k), hb((size_t)k * n), ref((size_t)m * n, 0.0)
    {
        unsigned s = 12345;
        auto rnd = [&] { s = s * 1664525u + 1013904223u; return (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f; };
        for (auto& x : ha) x = rnd();
        for (auto& x : hb) x = rnd();
        CK(cudaMalloc(&A, ha.size() * 4));
        CK(cudaMalloc(&B, hb.size() * 4));
        CK(cudaMalloc(&C, ref.size() * 4));
        CK(cudaMalloc(&flush, flush_bytes));
        CK(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
        CB(cublasCreate(&h));
        CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
        if ((double)M * N * K <= 4e9) {
            for (int i = 0; i < M; ++i)
                for (int kk = 0; kk < K; ++kk) {
                    const double av = ha[(size_t)i * K + kk];
                    const float* brow = &hb[(size_t)kk * N];
                    double* crow = &ref[(size_t)i * N];
                    for (int j = 0; j < N; ++j) crow[j] += av * brow[j];
                }
        } else {
            // Too large for a CPU float64 product in reasonable time (4096^3 is 69 GFLOP): the
            // reference is cuBLAS's FP32 result, and "cublas" then checks only itself.
            cublas().launch();
            CK(cudaDeviceSynchronize());
            std::vector<float> hc(ref.size());
            CK(cudaMemcpy(hc.data(), C, hc.size() * 4, cudaMemcpyDeviceToHost));
            std::copy(hc.begin(), hc.end(), ref.begin());
            printf("reference: cuBLAS FP32 (M*N*K > 4e9)\n");
        }
        for (double x : ref) cmax = std::max(cmax, fabs(x));
    }

    // Row-major C = A B as cuBLAS's column-major C^T = B^T A^T.
    Method cublas()
    {
        return {"cublas", [this] {
                    const float one = 1.0f, zero = 0.0f;
                    CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C, N));
                }};
    }

    // One launch into a NaN-poisoned C, compared with the reference; false when it fails.
    bool verify(const Method& m)
    {
        CK(cudaMemset(C, 0xff, ref.size() * 4));
        m.launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> hc(ref.size());
        CK(cudaMemcpy(hc.data(), C, hc.size() * 4, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (size_t i = 0; i < hc.size(); ++i)
            worst = std::max(worst, std::isnan(hc[i]) ? INFINITY : fabs((double)hc[i] - ref[i]));
        const bool ok = worst / cmax <= 1e-4;
        printf("  verify %-8s max |C - ref| / max |ref| = %.2e %s\n", m.name.c_str(), worst / cmax, ok ? "ok" : "FAILED");
        return ok;
    }

    // Times every method reps times, in turn (3 untimed rounds first); prints medians against
    // the first method (cuBLAS).
    void time(const std::vector<Method>& methods, int reps)
    {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<std::vector<float>> t(methods.size());
        for (int r = 0; r < reps + 3; ++r)
            for (size_t m = 0; m < methods.size(); ++m) {
                CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
                CK(cudaEventRecord(e0));
                methods[m].launch();
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (r >= 3) t[m].push_back(ms * 1000.0f);
            }
        auto median = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
        const float roof = median(t[0]);
        const double flop = 2.0 * M * N * K;
        for (size_t m = 0; m < methods.size(); ++m) {
            const float med = median(t[m]);
            printf("  %-8s %7.2f us  %8.0f GFLOP/s  %6.1f %% of cuBLAS  (min %.2f)\n", methods[m].name.c_str(), med,
                   flop / med / 1e3, 100.0 * roof / med, *std::min_element(t[m].begin(), t[m].end()));
        }
    }
};
