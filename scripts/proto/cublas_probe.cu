// Session 16 (issue 10): which kernel cuBLAS runs for the tool's SGEMM baseline at a shape
// (row-major C = A B as the tool computes it: column-major B^T A^T, FP32 math, no TF32), and how
// long it takes there, L2 flushed before each launch. Run it under Nsight Compute to get the
// kernel's name, grid, block and registers (scripts/proto/gpu-cublas-probe.sh).
//   nvcc -O3 -arch=sm_90 -o probe cublas_probe.cu -lcublas && ./probe M N K [reps]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
#define CB(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %s: %d\n", #x, (int)s); return 1; } } while (0)

int main(int argc, char** argv)
{
    if (argc < 4) { printf("usage: %s M N K [reps]\n", argv[0]); return 2; }
    const int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
    const int reps = argc > 4 ? atoi(argv[4]) : 30;
    float *a, *b, *c;
    void* flush;
    const size_t flush_bytes = 256 << 20;
    CK(cudaMalloc(&a, sizeof(float) * m * k));
    CK(cudaMalloc(&b, sizeof(float) * k * n));
    CK(cudaMalloc(&c, sizeof(float) * m * n));
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(a, 0, sizeof(float) * m * k));
    CK(cudaMemset(b, 0, sizeof(float) * k * n));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const float one = 1.0f, zero = 0.0f;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
        CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
        CK(cudaEventRecord(e0));
        CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    printf("cublasSgemm %dx%dx%d: median %.4f ms, %.0f GFLOP/s\n", m, n, k, med, 2.0 * m * n * k / med / 1e6);
    return 0;
}
