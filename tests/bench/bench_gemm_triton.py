"""The project's own Triton peer for tests/bench/bench_gemm_peers.py: what a user writing W8A8 in Triton gets.

- int8_gemm_dequant(a, b, s_act, s_w, bias): A [M,K] int8 row-major times B [N,K] int8 row-major
  (K-major, so A @ B^T) with int32 accumulation and the dequant epilogue fused:
  y[m,n] = bf16(acc[m,n] * s_act[m] * s_w[n] + bias[n]). Autotuned over Hopper-sized tiles.
- quantize_per_token(x): bf16 [M,K] -> int8 [M,K] and an f32 scale per row, scale = absmax/127
  (clamped at 1e-8), q = round-half-even(x / scale) clamped to [-127, 127], as torch.round does.
- w8a8(x, wq, s_w, bias): the two together, the end-to-end figure.

Bounds: offsets are 32-bit, so M*K, N*K and M*N must stay under 2^31 (every benchmark shape does);
any M, N, K work (tails are masked), K a multiple of 16 keeps the loads vectorised.
Importing this module needs Triton; bench_gemm_peers.py catches the failure and goes on."""
import torch
import triton
import triton.language as tl

try:  # where libdevice lives moved between Triton releases
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover - older Triton
    from triton.language.extra.cuda import libdevice

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages). int8 tiles: one stage of 128x256x128 is 48 KiB
# of shared memory, so 4 stages still fit the H200's 227 KiB.
_CONFIGS = [
    (128, 256, 128, 8, 3),
    (256, 128, 128, 8, 3),
    (128, 256, 128, 8, 4),
    (128, 128, 128, 8, 4),
    (128, 128, 128, 4, 4),
    (128, 128, 64, 4, 5),
    (128, 128, 64, 8, 4),
    (64, 128, 128, 4, 4),
    (64, 128, 128, 4, 5),
]


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
             for bm, bn, bk, w, s in _CONFIGS],
    key=["M", "N", "K"],
)
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _k_int8_gemm_dequant(a_ptr, b_ptr, y_ptr, sa_ptr, sb_ptr, bias_ptr, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    # Grouped launch order: GROUP_M row-tiles share each column band of B while it sits in L2.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_pid_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_pid_n)) // group_size

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows past M / columns past N wrap onto valid rows, so the loads need no M/N mask; the store masks them.
    am = tl.max_contiguous(tl.multiple_of(offs_m % M, BLOCK_M), BLOCK_M)
    bn = tl.max_contiguous(tl.multiple_of(offs_n % N, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + am[:, None] * K + offs_k[None, :]      # [BLOCK_M, BLOCK_K], K contiguous
    b_ptrs = b_ptr + bn[None, :] * K + offs_k[:, None]      # [BLOCK_K, BLOCK_N] view of B^T, K contiguous

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K

    sa = tl.load(sa_ptr + offs_m, mask=offs_m < M, other=0.0)
    sb = tl.load(sb_ptr + offs_n, mask=offs_n < N, other=0.0)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    y = acc.to(tl.float32) * sa[:, None] * sb[None, :] + bias[None, :]
    y_ptrs = y_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(y_ptrs, y.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _k_quantize_per_token(x_ptr, q_ptr, s_ptr, K, BLOCK: tl.constexpr):
    # One program per row; the whole row (BLOCK = next power of two >= K) is held in registers,
    # so x is read once.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < K
    v = tl.load(x_ptr + row * K + offs, mask=mask, other=0.0).to(tl.float32)
    # Triton's "/" on f32 is div.full (approximate); div_rn is IEEE division, the one torch does, so the
    # scale and the codes come out as torch's, ties included.
    s = tl.maximum(libdevice.div_rn(tl.max(tl.abs(v), axis=0), 127.0), 1e-8)
    tl.store(s_ptr + row, s)
    q = libdevice.rint(libdevice.div_rn(v, s))               # round half to even, like torch.round
    q = tl.minimum(tl.maximum(q, -127.0), 127.0)
    tl.store(q_ptr + row * K + offs, q.to(tl.int8), mask=mask)


def _check_2g(*dims):
    for a, b in dims:
        if a * b >= 2 ** 31:
            raise ValueError(f"bench_gemm_triton: {a}x{b} elements overflow the kernel's 32-bit offsets")


def int8_gemm_dequant(a, b, s_act, s_w, bias, out=None):
    """a [M,K] int8, b [N,K] int8 (both contiguous), s_act [M] f32, s_w [N] f32, bias [N] -> bf16 [M,N]."""
    M, K = a.shape
    N = b.shape[0]
    assert b.shape[1] == K and a.is_contiguous() and b.is_contiguous()
    _check_2g((M, K), (N, K), (M, N))
    if out is None:
        out = torch.empty(M, N, device=a.device, dtype=torch.bfloat16)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    _k_int8_gemm_dequant[grid](a, b, out, s_act, s_w, bias, M, N, K)
    return out


def quantize_per_token(x):
    """x [M,K] bf16 contiguous -> (int8 [M,K], f32 [M] scale)."""
    M, K = x.shape
    assert x.is_contiguous()
    _check_2g((M, K))
    q = torch.empty(M, K, device=x.device, dtype=torch.int8)
    s = torch.empty(M, device=x.device, dtype=torch.float32)
    block = triton.next_power_of_2(K)
    _k_quantize_per_token[(M,)](x, q, s, K, BLOCK=block, num_warps=16 if block >= 8192 else 8)
    return q, s


def w8a8(x, wq, s_w, bias):
    q, s = quantize_per_token(x)
    return int8_gemm_dequant(q, wq, s, s_w, bias)


def best_config():
    """The tile the autotuner picked for the last shape it tuned, as text."""
    c = getattr(_k_int8_gemm_dequant, "best_config", None)
    if c is None:
        return "?"
    k = c.kwargs
    return f"{k['BLOCK_M']}x{k['BLOCK_N']}x{k['BLOCK_K']} w{c.num_warps} s{c.num_stages}"


def check(x, wq, s_w, bias):
    """Compare against torch (per-token quantization, torch._int_mm, the same epilogue in f32);
    raise AssertionError when wrong. Returns (max |dy| of the GEMM, max |dy| end to end, int8 codes
    that differ from torch's quantization)."""
    s_ref = (x.float().abs().amax(dim=1) / 127).clamp_min(1e-8)
    q_ref = torch.round(x.float() / s_ref[:, None]).clamp(-127, 127).to(torch.int8)
    q, s = quantize_per_token(x)
    torch.testing.assert_close(s, s_ref, rtol=1e-6, atol=0)
    dq = (q.int() - q_ref.int()).abs()
    # Same IEEE division and rounding as torch, but the reference divides where this kernel may round
    # the quotient differently at a tie: up to 0.01% of codes off by one is tolerated (seen: 2e-5).
    bad = int((dq > 0).sum())
    assert int(dq.max()) <= 1 and bad <= max(16, q.numel() // 10000), f"quantize: {bad} codes differ, max {int(dq.max())}"

    acc = torch._int_mm(q_ref, wq.t())
    ref = (acc.float() * s_ref[:, None] * s_w[None, :] + bias.float()[None, :]).to(torch.bfloat16).float()
    y = int8_gemm_dequant(q_ref, wq, s_ref, s_w, bias).float()
    err_gemm = (y - ref).abs().max().item()
    # Both sides round the same f32 value to bf16; allow for f32 products taken in another order.
    torch.testing.assert_close(y, ref, rtol=1e-2, atol=1e-3 * ref.abs().max().item() + 1e-4)
    y2 = w8a8(x, wq, s_w, bias).float()
    err_e2e = (y2 - ref).abs().max().item()
    torch.testing.assert_close(y2, ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item() + 1e-3)
    return err_gemm, err_e2e, bad
