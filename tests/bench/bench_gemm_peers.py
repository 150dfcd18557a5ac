#!/usr/bin/env python3
"""PyTorch peers of tests/bench/bench_gemm.c on the same shapes (M x K x N), CUDA events, median of 20
after warm-up: F.linear bf16, torch._int_mm (int8 GEMM alone), torch._scaled_mm (fp8 GEMM alone),
eager W8A8 end to end (per-token int8 quantization + _int_mm + dequant epilogue), and the
project's own Triton peer (tests/bench/bench_gemm_triton.py): "Triton int8 GEMM+dequant" (the GEMM with the
epilogue fused, on already-quantized operands) and "Triton W8A8 e2e" (Triton quantize + that GEMM),
each checked against torch._int_mm before it is timed. Without Triton those two rows are skipped.
Run beside build/bench_gemm in one GPU call (make bench-gemm) and compare the TF columns."""
import os
import statistics
import time
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("bench_gemm_peers: PyTorch not installed; skipping")
    sys.exit(0)

SHAPES = [(4608, 3072, 3072), (4608, 3072, 12288), (4608, 12288, 3072), (8192, 8192, 8192), (1024, 3072, 12288), (256, 3072, 3072)]


def bench(fn):
    time.sleep(0.03)  # the card idle first, as bench_gemm.c does before each of its figures
    for _ in range(3):
        fn()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def load_triton():
    """The Triton peer module, or None after printing why it is missing (the other peers go on)."""
    try:
        import bench_gemm_triton
        return bench_gemm_triton
    except Exception as e:  # no Triton, or one too old for the kernel
        print(f"bench_gemm_peers: Triton peer unavailable ({type(e).__name__}: {e}); skipping its rows")
        return None


def triton_peers(tri, M, K, N, x, sw, wq_real):
    """The Triton rows for one shape: checked against torch first, so a wrong kernel reports no speed."""
    bias = (torch.randn(N, device=x.device) * 0.1).to(torch.bfloat16)
    s = (x.float().abs().amax(dim=1) / 127).clamp_min(1e-8)
    q = torch.round(x.float() / s[:, None]).clamp(-127, 127).to(torch.int8)
    y = torch.empty(M, N, device=x.device, dtype=torch.bfloat16)
    err_gemm, err_e2e, bad = tri.check(x, wq_real, sw, bias)
    print(f"{M:5d}x{K:5d}x{N:5d}  {'Triton check':24s} vs torch._int_mm: max err gemm {err_gemm:.3g}, e2e {err_e2e:.3g}; "
          f"int8 codes off by one {bad}; tile {tri.best_config()}")
    return [("Triton int8 GEMM+dequant", lambda: tri.int8_gemm_dequant(q, wq_real, s, sw, bias, out=y)),
            ("Triton W8A8 e2e", lambda: tri.w8a8(x, wq_real, sw, bias))]


def main():
    if not torch.cuda.is_available():
        print("bench_gemm_peers: no CUDA device; skipping")
        return
    dev = "cuda"
    print(f"peers on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    tri = None if os.environ.get("LWO_BENCH_NO_TRITON") else load_triton()
    print(f"{'M x K x N':20s} {'peer':24s} {'ms':>10s} {'TF':>10s}")
    for M, K, N in SHAPES:
        flop = 2.0 * M * N * K
        x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.05
        xq = torch.randint(-127, 128, (M, K), device=dev, dtype=torch.int8)
        wq = torch.randint(-127, 128, (N, K), device=dev, dtype=torch.int8)
        sw = (w.float().abs().amax(dim=1) / 127).clamp_min(1e-8)
        wq_real = torch.round(w.float() / sw[:, None]).clamp(-127, 127).to(torch.int8)
        peers = [("F.linear bf16", lambda: F.linear(x, w))]
        peers.append(("torch._int_mm", lambda: torch._int_mm(xq, wq.t())))

        def w8a8():
            s = (x.float().abs().amax(dim=1, keepdim=True) / 127).clamp_min(1e-8)
            q = torch.round(x.float() / s).clamp(-127, 127).to(torch.int8)
            acc = torch._int_mm(q, wq_real.t())
            return (acc.float() * s * sw[None, :]).to(torch.bfloat16)
        peers.append(("eager W8A8 e2e", w8a8))
        if hasattr(torch, "float8_e4m3fn") and torch.cuda.get_device_capability() >= (8, 9):
            x8 = x.to(torch.float8_e4m3fn)
            w8 = w.to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev)
            peers.append(("torch._scaled_mm fp8", lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)))
        if tri is not None:
            try:
                peers += triton_peers(tri, M, K, N, x, sw, wq_real)
            except Exception as e:  # a compile failure or a wrong result: no Triton speed for this shape
                msg = " ".join(str(e).split())[:300]
                for name in ("Triton int8 GEMM+dequant", "Triton W8A8 e2e"):
                    print(f"{M:5d}x{K:5d}x{N:5d}  {name:24s} unavailable: {type(e).__name__}: {msg}")
        for name, fn in peers:
            try:
                ms = bench(fn)
                print(f"{M:5d}x{K:5d}x{N:5d}  {name:24s} {ms:10.3f} {flop / ms * 1e-9:10.1f}")
            except Exception as e:  # a peer missing on this build is reported, not fatal
                print(f"{M:5d}x{K:5d}x{N:5d}  {name:24s} unavailable: {e}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
