"""PyTorch beside lwo, in the same run: the device copy ceiling, fp8 -> bf16 upcast, eager
per-token int8 quantization. Reads lwo's figures from the file bench.c wrote and prints the table."""
import sys, torch
def ev_time(fn, iters=20, warm=3):
    for _ in range(warm): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return (ts[9] + ts[10]) / 2
lwo = {}
for line in open(sys.argv[1]):
    k, v = line.split(); lwo[k] = float(v)
t = {}
a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda").fill_(0x3c); b = torch.empty_like(a)
t["copy"] = 2 * a.numel() / ev_time(lambda: b.copy_(a)) / 1e9
del a, b
n = 1 << 30
w8 = torch.full((n,), 0x3c, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
t["upcast"] = 3 * n / ev_time(lambda: w8.to(torch.bfloat16)) / 1e9
del w8
x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
def q():
    s = x.abs().amax(dim=1, keepdim=True).float() / 127
    return torch.round(x.float() / s).clamp(-127, 127).to(torch.int8), s
t["quant"] = (3 * x.numel() + 4 * x.shape[0]) / ev_time(q) / 1e9
ceil = lwo["copy_ceiling_TBps"]
print()
print("| kernel (TB/s, bytes read + written) | lwo | PyTorch | lwo / PyTorch | lwo / copy ceiling |")
print("| --- | --- | --- | --- | --- |")
print(f"| device copy ceiling (lwo: cuMemcpyDtoD; torch: copy_) | {ceil:.2f} | {t['copy']:.2f} | | 1.00 |")
print(f"| upcast e4m3 -> bf16, 2^30 elements | {lwo['upcast_e4m3_bf16_TBps']:.2f} | {t['upcast']:.2f} | {lwo['upcast_e4m3_bf16_TBps']/t['upcast']:.2f}x | {lwo['upcast_e4m3_bf16_TBps']/ceil:.0%} |")
print(f"| per-token int8 quantize, bf16 [16384, 8192] | {lwo['quant_act_int8_TBps']:.2f} | {t['quant']:.2f} (eager) | {lwo['quant_act_int8_TBps']/t['quant']:.2f}x | {lwo['quant_act_int8_TBps']/ceil:.0%} |")
print(f"| per-tensor fp8 quantize with computed scale (2 passes) | {lwo['quant_fp8_tensor_TBps_one_pass_bytes']:.2f} | | | {lwo['quant_fp8_tensor_TBps_one_pass_bytes']/ceil:.0%} |")
for k in ("cold", "warm"):
    if f"startup_{k}_beyond_cuinit_ms" in lwo:
        print(f"| {k} start: create to first kernel, beyond cuInit (ms) | {lwo[f'startup_{k}_beyond_cuinit_ms']:.1f} | | | cuInit {lwo[f'startup_{k}_cuinit_ms']:.0f} ms |")
for k, what in (("cold", "empty cubin cache: every module compiled"), ("warm", "the cache that run filled")):
    if f"demo_start_{k}_s" in lwo:
        print(f"| the demo's whole run, {what} (s) | {lwo[f'demo_start_{k}_s']:.2f} | | | goal: cold < 20 s |")
