"""Prints the streaming benchmark's table from the "key value" lines of bench_stream.c and
bench_stream_peers.py (one file, one GPU run)."""
import sys
v = {}
for line in open(sys.argv[1]):
    k, x = line.split(); v[k] = float(x)
bw = v.get("lwo_h2d_pinned_GBps", 0)
print()
print(f"24-block stack, M=4608 (bf16 {v.get('peer_stack_GB', 0):.2f} GB); host-to-device pinned: lwo {bw:.1f} GB/s, PyTorch {v.get('peer_h2d_pinned_GBps', 0):.1f} GB/s")
if "lwo_h2d_64MiB_GBps" in v:
    print("64 MiB copies, GB/s: one stream %.1f, two streams %.1f, beside FMA kernels %.1f, beside memory-bound kernels %.1f" % tuple(
        v.get("lwo_h2d_64MiB" + k + "_GBps", 0) for k in ("", "_2streams", "_busy_fma", "_busy_mem")))
print("| storage | budget | VRAM budget GB | ring MB | streamed GB/pass | ms/forward | bound ms = max(compute, bytes/bw) | ms / bound | compute waited | one more pass: ms, waits, profile | plan's model ms | copies GB/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
names = {"bf16": "bf16", "fp8": "fp8 (upcast)", "fp8w8a8": "fp8 W8A8", "int8": "int8"}
for f in ("bf16", "fp8", "fp8w8a8", "int8"):
    for b in ("resident", "half", "minimum"):
        k = f"lwo_{f}_{b}"
        if k + "_ms" not in v: continue
        ms, bound = v[k + "_ms"], v[k + "_bound_ms"]
        print(f"| {names[f]} | {b} | {v[k + '_budget_GB']:.2f} | {v.get(k + '_ring_MB', 0):.0f} | {v[k + '_streamed_GB']:.2f} | {ms:.1f} | {bound:.1f} | {ms / bound:.3f} | {100 * v[k + '_wait_frac']:.1f}% | {v.get(k + '_last_pass_ms', 0):.1f}, {v.get(k + '_last_wait_ms', 0):.1f}, {v.get(k + '_profile_ms', 0):.1f} | {v.get(k + '_model_ms', 0):.1f} | {v.get(k + '_copy_GBps', 0):.1f} |")
print()
print("| PyTorch peer (bf16) | ms/forward |")
print("| --- | --- |")
for k, n in (("peer_resident_ms", "all resident"), ("peer_side_stream_prefetch_ms", "side-stream prefetch, pinned"), ("peer_accelerate_cpu_offload_ms", "accelerate.cpu_offload")):
    if k in v: print(f"| {n} | {v[k]:.1f} |")
for f in ("fp8", "fp8w8a8", "int8"):
    if f"lwo_{f}_minimum_ms" in v and "peer_side_stream_prefetch_ms" in v:
        print(f"{names[f]} fully streamed vs PyTorch side-stream prefetch of bf16: {v['peer_side_stream_prefetch_ms'] / v[f'lwo_{f}_minimum_ms']:.2f}x faster")
ops = ("qkv", "out", "add", "up", "gelu", "down", "add2")
print()
print("resident pass, ms per op summed over the 24 blocks (events between ops):")
print("| storage | " + " | ".join(ops) + " | sum |")
print("| --- |" + " --- |" * (len(ops) + 1))
for f in ("bf16", "fp8", "fp8w8a8", "int8"):
    row = [v.get(f"lwo_{f}_resident_op_{o}_ms") for o in ops]
    if None in row: continue
    print(f"| {names[f]} | " + " | ".join(f"{x:.1f}" for x in row) + f" | {sum(row):.1f} |")
if all(f"peer_resident_op_{o}_ms" in v for o in ops) and all(f"lwo_bf16_resident_op_{o}_ms" in v for o in ops):
    print()
    print("resident pass per op, bf16 weights: lwo vs PyTorch (ms summed over the 24 blocks, events between ops):")
    print("| op | lwo | PyTorch | PyTorch / lwo |")
    print("| --- | --- | --- | --- |")
    for o in ops + ("sum",):
        a = sum(v[f"lwo_bf16_resident_op_{p}_ms"] for p in ops) if o == "sum" else v[f"lwo_bf16_resident_op_{o}_ms"]
        b = sum(v[f"peer_resident_op_{p}_ms"] for p in ops) if o == "sum" else v[f"peer_resident_op_{o}_ms"]
        print(f"| {o} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
print()
print("resident pass with 64 MiB copies running beside it on another stream (what the bus's writes cost the compute):")
print("| storage | ms/forward alone | beside copies | ratio |")
print("| --- | --- | --- | --- |")
for f in ("bf16", "fp8", "fp8w8a8", "int8"):
    a, b = v.get(f"lwo_{f}_resident_ms"), v.get(f"lwo_{f}_resident_beside_copies_ms")
    if a and b: print(f"| {names[f]} | {a:.1f} | {b:.1f} | {b / a:.3f} |")
if "lwo_bf16_resident_ms" in v and "peer_resident_ms" in v:
    print(f"bf16 all resident: lwo {v['lwo_bf16_resident_ms']:.1f} ms vs PyTorch {v['peer_resident_ms']:.1f} ms")
