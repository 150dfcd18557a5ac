"""Peers of the streaming benchmark, measured in the same run as lwo's: the 24-block stack of
ANCHORS.md (qkv 3072->9216, out 3072->3072, up 3072->12288, down 12288->3072; M = 4608 tokens;
bf16 weights) all resident, streamed by a hand-written side-stream prefetch from pinned memory
(the diffusers group-offload pattern), and through accelerate.cpu_offload; plus the pinned
host-to-device bandwidth. Writes "key value" lines to the file named by argv[1]."""
import sys, time, torch, torch.nn.functional as F
H, M, NB = 3072, 4608, 24
out = open(sys.argv[1], "a")
def emit(k, v):
    print(f"{k:44s} {v:10.3f}"); out.write(f"{k} {v:.6f}\n"); out.flush()
def ev_time(fn, iters, warm):
    for _ in range(warm): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2]
# host -> device, pinned, 1 GiB
hp = torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True).fill_(7); d = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
emit("peer_h2d_pinned_GBps", (1 << 30) / ev_time(lambda: d.copy_(hp, non_blocking=True), 5, 2) / 1e6)
del hp, d
shapes = [(3 * H, H), (H, H), (4 * H, H), (H, 4 * H)]
g = torch.Generator().manual_seed(0)
blocks = [[(torch.randn(n, k, generator=g, dtype=torch.float32).mul_(k ** -0.5).to(torch.bfloat16).pin_memory(),
            torch.zeros(n, dtype=torch.bfloat16).pin_memory()) for (n, k) in shapes] for _ in range(NB)]
stack_bytes = sum(w.numel() * 2 + b.numel() * 2 for blk in blocks for (w, b) in blk)
emit("peer_stack_GB", stack_bytes / 1e9)
x = torch.randn(M, H, device="cuda", dtype=torch.bfloat16)
def block_fwd(y, p):
    (wq, bq), (wo, bo), (wu, bu), (wd, bd) = p
    y = y + F.linear(F.linear(y, wq, bq)[:, :H], wo, bo)
    return y + F.linear(F.gelu(F.linear(y, wu, bu), approximate="tanh"), wd, bd)
with torch.no_grad():
    dev = [[(w.cuda(), b.cuda()) for (w, b) in blk] for blk in blocks]
    def resident():
        y = x
        for p in dev: y = block_fwd(y, p)
        return y
    emit("peer_resident_ms", ev_time(resident, 5, 2))
    # where PyTorch's pass goes, per op summed over the blocks, with events between ops as
    # bench_stream.c times lwo's (after one untimed pass)
    names = ("qkv", "out", "add", "up", "gelu", "down", "add2")
    def block_ops(y, p):
        (wq, bq), (wo, bo), (wu, bu), (wd, bd) = p
        q = yield F.linear(y, wq, bq)
        o = yield F.linear(q[:, :H], wo, bo)
        y = yield y + o
        u = yield F.linear(y, wu, bu)
        g = yield F.gelu(u, approximate="tanh")
        d = yield F.linear(g, wd, bd)
        yield y + d
    def breakdown():
        tot = [0.0] * len(names)
        y = x
        for p in dev:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(len(names) + 1)]
            ev[0].record()
            gen = block_ops(y, p); r = next(gen)
            for i in range(len(names)):
                ev[i + 1].record()
                if i + 1 < len(names): r = gen.send(r)
            y = r
            torch.cuda.synchronize()
            for i in range(len(names)): tot[i] += ev[i].elapsed_time(ev[i + 1])
        return tot
    breakdown()
    for n, ms in zip(names, breakdown()): emit(f"peer_resident_op_{n}_ms", ms)
    del dev; torch.cuda.empty_cache()
    side = torch.cuda.Stream()
    def prefetch():
        cur = torch.cuda.current_stream()
        def fetch(blk):
            with torch.cuda.stream(side):
                p = [(w.to("cuda", non_blocking=True), b.to("cuda", non_blocking=True)) for (w, b) in blk]
                ev = torch.cuda.Event(); ev.record(side)
            return p, ev
        y = x; nxt = fetch(blocks[0])
        for i in range(NB):
            p, ev = nxt
            if i + 1 < NB: nxt = fetch(blocks[i + 1])
            cur.wait_event(ev)
            for (w, b) in p: w.record_stream(cur); b.record_stream(cur)
            y = block_fwd(y, p)
        return y
    emit("peer_side_stream_prefetch_ms", ev_time(prefetch, 3, 1))
    try:
        import os
        if os.environ.get("LWO_BENCH_QUICK"): raise RuntimeError("skipped (LWO_BENCH_QUICK)")
        import accelerate, torch.nn as nn
        class Blk(nn.Module):
            def __init__(s, blk):
                super().__init__()
                s.l = nn.ModuleList()
                for (w, b) in blk:
                    lin = nn.Linear(w.shape[1], w.shape[0], dtype=torch.bfloat16); lin.weight.data = w.clone(); lin.bias.data = b.clone(); s.l.append(lin)
            def forward(s, y):
                y = y + s.l[1](s.l[0](y)[:, :H]); return y + s.l[3](F.gelu(s.l[2](y), approximate="tanh"))
        seq = nn.Sequential(*[Blk(b) for b in blocks])
        accelerate.cpu_offload(seq, execution_device=torch.device("cuda"))
        emit("peer_accelerate_cpu_offload_ms", ev_time(lambda: seq(x), 2, 1))
    except Exception as ex:
        print("accelerate.cpu_offload failed:", str(ex)[:200])
