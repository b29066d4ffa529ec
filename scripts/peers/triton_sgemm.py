"""Triton's autotune on the same SGEMM, as a peer for `scripts/gpu.sh bench`.

    python3 scripts/peers/triton_sgemm.py MxNxK

One process, as a user would run it: the Triton matmul of the Triton tutorial (fp32 in and
out, IEEE fp32 dot products: no TF32, like our sgemm and the cuBLAS roof), autotuned over the
tutorial's configurations on the first call, checked against cuBLAS, then timed against cuBLAS
SGEMM (TF32 off) with L2 flushed between launches. Prints one line:
    triton MxNxK ms=... cublas_ms=... pct_of_cublas=... config=...
The caller times the whole process. Needs torch and triton; prints `triton: unavailable (...)`
and exits 3 without them.
"""
import sys

try:
    import torch
    import triton
    import triton.language as tl
except Exception as e:  # noqa: BLE001 - any import failure means no peer on this machine
    print(f"triton: unavailable ({type(e).__name__}: {e})")
    sys.exit(3)


def configs():
    out = []
    for bm, bn, bk, stages, warps in [
        (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
    ]:
        out.append(triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8},
                                 num_stages=stages, num_warps=warps))
    return out


@triton.autotune(configs=configs(), key=["M", "N", "K"])
@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    group = GROUP_M * grid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pm = first_m + (pid % group) % size_m
    pn = (pid % group) // size_m
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        x = tl.load(a + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc, input_precision="ieee")
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                 c.stride(0), c.stride(1))


def main():
    m, n, k = (int(x) for x in sys.argv[1].split("x"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float32)
    b = torch.randn(k, n, device="cuda", dtype=torch.float32)
    c = torch.empty(m, n, device="cuda", dtype=torch.float32)
    run(a, b, c)  # autotunes
    ref = a @ b
    err = ((c - ref).abs().max() / ref.abs().max()).item()
    if err > 1e-4:
        print(f"triton {sys.argv[1]}: wrong result (max relative error {err:.2e})")
        sys.exit(1)
    t_triton = triton.testing.do_bench(lambda: run(a, b, c), warmup=5, rep=50)
    t_cublas = triton.testing.do_bench(lambda: torch.mm(a, b, out=c), warmup=5, rep=50)
    print(f"triton {sys.argv[1]} ms={t_triton:.4f} cublas_ms={t_cublas:.4f} "
          f"pct_of_cublas={100 * t_cublas / t_triton:.1f} config={matmul.best_config}")


if __name__ == "__main__":
    main()
