#!/usr/bin/env python3
"""The GEMM benchmark's summary: lwo's rows (tests/bench/bench_gemm.c) beside its peers'
(tests/bench/bench_gemm_peers.py) from one GPU run's output, as the ratios the Hopper GEMM issue asks
for: int8 GEMM against torch._int_mm (with TOP/s and the share of the 1979 TOP/s dense peak), fp8
GEMM against torch._scaled_mm, and W8A8 lwo_linear end to end (int8 and fp8) against bf16
F.linear; then the fp8 upcast weight's lwo_linear with the GEMM reading the codes as stored
(sm_90a, lwo_desc.gemm_kernels 9) against the default call through a bf16 copy, lwo's bf16 GEMM and
bf16 F.linear. A ratio above 1 means lwo is faster.

  bench_gemm_table.py FILE    the table of one run's output (make bench-gemm writes build/bench_gemm.txt)
  bench_gemm_table.py --check the parser and the ratios on a sample of real output; ends with
                              "N passed, N failed" (make test)
"""
import re
import sys

PEAK_8BIT = 1979.0  # dense int8 / fp8 TOP/s of the H200 (datasheet, ../shared/ANCHORS.md)
LWO_ROW = re.compile(r"^\s*(\d+)x\s*(\d+)x\s*(\d+)\s+(bf16|fp8 upcast|int8 w8a8|fp8 w8a8)\s+([\d.\s]+)$")
PEER_ROW = re.compile(r"^\s*(\d+)x\s*(\d+)x\s*(\d+)\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s*$")
LWO_COLS = ("gemm_ms", "gemm_TF", "t64x128", "t128x128", "t128x256", "pingpong", "pp2x1", "c256x2x1",
            "e2e_ms", "e2e_TF", "quant_ms", "quant_TBps", "nosplit_ms", "c192x2x1", "stored_e2e_ms", "regs_e2e_ms",
            "copy_e2e_ms")


def parse(lines):
    """(lwo, peers): lwo[(M, K, N)][path] = {column: value}; peers[(M, K, N)][name] = ms."""
    lwo, peers = {}, {}
    for line in lines:
        m = LWO_ROW.match(line)
        if m:
            vals = [float(x) for x in m.group(5).split()]
            if len(LWO_COLS) - 5 <= len(vals) <= len(LWO_COLS):   # older runs lack the last columns
                lwo.setdefault(tuple(int(g) for g in m.group(1, 2, 3)), {})[m.group(4)] = dict(zip(LWO_COLS, vals))
            continue
        m = PEER_ROW.match(line)
        if m:
            peers.setdefault(tuple(int(g) for g in m.group(1, 2, 3)), {})[m.group(4)] = float(m.group(5))
    return lwo, peers


def rows(lwo, peers):
    """One dict a shape present in both: the figures and their ratios (None where a side is missing)."""
    out = []
    for shape in sorted(lwo, key=lambda s: (-s[0] * s[1] * s[2])):
        if shape not in peers:
            continue
        M, K, N = shape
        L, P = lwo[shape], peers[shape]
        r = {"shape": shape}
        i8, f8 = L.get("int8 w8a8"), L.get("fp8 w8a8")
        r["int8_ms"], r["int_mm_ms"] = (i8 or {}).get("gemm_ms"), P.get("torch._int_mm")
        r["fp8_ms"], r["scaled_mm_ms"] = (f8 or {}).get("gemm_ms"), P.get("torch._scaled_mm fp8")
        r["w8a8_ms"], r["w8a8_fp8_ms"] = (i8 or {}).get("e2e_ms"), (f8 or {}).get("e2e_ms")
        r["linear_ms"] = P.get("F.linear bf16")
        r["int8_tops"] = 2.0 * M * N * K / r["int8_ms"] * 1e-9 if r["int8_ms"] else None
        ratio = lambda peer, ours: peer / ours if peer and ours else None
        r["int8_x"] = ratio(r["int_mm_ms"], r["int8_ms"])
        r["fp8_x"] = ratio(r["scaled_mm_ms"], r["fp8_ms"])
        r["w8a8_x"] = ratio(r["linear_ms"], r["w8a8_ms"])
        r["w8a8_fp8_x"] = ratio(r["linear_ms"], r["w8a8_fp8_ms"])
        up, bf = L.get("fp8 upcast"), L.get("bf16")
        # the copy path: its own column, or in runs before it the default e2e (which was the copy)
        r["up_ms"] = (up or {}).get("stored_e2e_ms") or None
        r["up_copy_ms"] = (up or {}).get("copy_e2e_ms") or (up or {}).get("e2e_ms")
        r["up_default_ms"] = (up or {}).get("e2e_ms")
        r["bf16_ms"] = (bf or {}).get("gemm_ms")
        r["up_regs_ms"] = (up or {}).get("regs_e2e_ms") or None
        r["up_copy_x"] = ratio(r["up_copy_ms"], r["up_ms"])
        r["regs_copy_x"] = ratio(r["up_copy_ms"], r["up_regs_ms"])
        r["up_bf16_x"] = ratio(r["bf16_ms"], r["up_ms"])
        r["up_linear_x"] = ratio(r["linear_ms"], r["up_ms"])
        r["default_linear_x"] = ratio(r["linear_ms"], r["up_default_ms"])
        out.append(r)
    return out


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(lwo, peers):
    lines = ["| M x K x N | int8 GEMM / `_int_mm` ms | int8 TOP/s (% of peak) | fp8 GEMM / `_scaled_mm` ms | "
             "W8A8 e2e int8 / fp8 / bf16 `F.linear` ms |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows(lwo, peers):
        M, K, N = r["shape"]
        tops = r["int8_tops"]
        lines.append(f"| {M}x{K}x{N} | {fmt(r['int8_ms'], '.3f')} / {fmt(r['int_mm_ms'], '.3f')} ({fmt(r['int8_x'], '.2f')}x) | "
                     f"{fmt(tops, '.0f')} ({fmt(tops / PEAK_8BIT * 100 if tops else None, '.0f')}%) | "
                     f"{fmt(r['fp8_ms'], '.3f')} / {fmt(r['scaled_mm_ms'], '.3f')} ({fmt(r['fp8_x'], '.2f')}x) | "
                     f"{fmt(r['w8a8_ms'], '.3f')} / {fmt(r['w8a8_fp8_ms'], '.3f')} / {fmt(r['linear_ms'], '.3f')} "
                     f"({fmt(r['w8a8_x'], '.2f')}x / {fmt(r['w8a8_fp8_x'], '.2f')}x) |")
    lines += ["", "| M x K x N | fp8 weight, bf16 x: read as stored / through a bf16 copy / lwo bf16 GEMM / bf16 `F.linear` ms | "
              "vs copy / vs lwo bf16 / vs `F.linear` | register A ms (vs copy) | default e2e ms (vs `F.linear`) |",
              "| --- | --- | --- | --- | --- |"]
    for r in rows(lwo, peers):
        M, K, N = r["shape"]
        lines.append(f"| {M}x{K}x{N} | {fmt(r['up_ms'], '.3f')} / {fmt(r['up_copy_ms'], '.3f')} / {fmt(r['bf16_ms'], '.3f')} / "
                     f"{fmt(r['linear_ms'], '.3f')} | {fmt(r['up_copy_x'], '.2f')}x / {fmt(r['up_bf16_x'], '.2f')}x / "
                     f"{fmt(r['up_linear_x'], '.2f')}x | {fmt(r['up_regs_ms'], '.3f')} ({fmt(r['regs_copy_x'], '.2f')}x) | "
                     f"{fmt(r['up_default_ms'], '.3f')} ({fmt(r['default_linear_x'], '.2f')}x) |")
    return "\n".join(lines)


SAMPLE = """\
lwo bench_gemm on NVIDIA H200 (sm_90a)
M x K x N            path          gemm ms  gemm TF    64x128   128x128   128x256  pingpong    pp 2x1   256 2x1    e2e ms   e2e TF  quant ms quant TB/s
 4608x 3072x 3072  int8 w8a8       0.077   1123.3     0.000     0.000     0.000     0.081     0.078     0.100     0.093    931.4    0.0206       2.06
 4608x 3072x 3072  fp8 w8a8        0.078   1112.8     0.000     0.000     0.000     0.080     0.077     0.097     0.093    934.5    0.0185       2.29
 8192x 8192x 8192  bf16            1.788    614.9     0.000     0.000     0.000     1.927     1.719     1.718     1.590    691.3    0.0000       0.00
 8192x 8192x 8192  fp8 upcast      1.432    767.8     0.000     0.000     0.000     0.000     0.000     0.000     1.402    754.6    0.0000       0.00     1.431     1.500     1.440     1.400     1.457
 8192x 8192x 8192  int8 w8a8       0.771   1425.9     0.000     0.000     0.000     0.879     0.833     0.907     0.828   1328.2    0.0794       2.54
 8192x 8192x 8192  fp8 w8a8        0.798   1377.4     0.000     0.000     0.000     0.934     0.877     0.966     0.850   1294.0    0.0720       2.79
peers on NVIDIA H200 (torch 2.11.0+cu130)
M x K x N            peer                             ms         TF
 4608x 3072x 3072  Triton check             vs torch._int_mm: max err gemm 0.0156, e2e 0.0625; int8 codes off by one 333; tile 128x128x64 w4 s5
 4608x 3072x 3072  F.linear bf16                 0.135      644.7
 4608x 3072x 3072  torch._int_mm                 0.149      583.6
 4608x 3072x 3072  torch._scaled_mm fp8          0.091      950.7
 8192x 8192x 8192  F.linear bf16                 1.510      728.1
 8192x 8192x 8192  torch._int_mm                 1.396      787.3
 8192x 8192x 8192  torch._scaled_mm fp8          0.792     1388.0
 1024x 3072x12288  F.linear bf16                 0.129      600.3
"""


def check():
    passed = failed = 0

    def ok(cond, what):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print("FAIL", what)

    lwo, peers = parse(SAMPLE.splitlines())
    ok(set(lwo) == {(4608, 3072, 3072), (8192, 8192, 8192)}, f"lwo shapes {sorted(lwo)}")
    ok(lwo[(8192, 8192, 8192)]["bf16"]["c256x2x1"] == 1.718, "the twelve columns in order")
    ok("Triton check" not in peers.get((4608, 3072, 3072), {}), "the Triton check line is not a timing")
    ok(peers[(8192, 8192, 8192)]["torch._scaled_mm fp8"] == 0.792, "a peer's ms")
    rs = rows(lwo, peers)
    ok([r["shape"] for r in rs] == [(8192, 8192, 8192), (4608, 3072, 3072)], "shapes in both, largest first")
    big = rs[0]
    ok(abs(big["int8_x"] - 1.396 / 0.771) < 1e-12, "int8 against _int_mm")
    ok(abs(big["fp8_x"] - 0.792 / 0.798) < 1e-12 and big["fp8_x"] < 1, "fp8 against _scaled_mm (slower: below 1)")
    ok(abs(big["w8a8_x"] - 1.510 / 0.828) < 1e-12, "W8A8 int8 end to end against F.linear")
    ok(abs(big["int8_tops"] - 2 * 8192 ** 3 / 0.771e-3 * 1e-12) < 1e-6, "TOP/s from ms")
    text = table(lwo, peers)
    ok("| 8192x8192x8192 | 0.771 / 1.396 (1.81x) | 1426 (72%) | 0.798 / 0.792 (0.99x) |" in text, "the table's 8192^3 row")
    ok(abs(big["up_copy_x"] - 1.457 / 1.440) < 1e-12 and abs(big["up_linear_x"] - 1.510 / 1.440) < 1e-12, "fp8 upcast ratios")
    ok(abs(big["up_bf16_x"] - 1.788 / 1.440) < 1e-12, "fp8 upcast against lwo's bf16 GEMM")
    ok("| 8192x8192x8192 | 1.440 / 1.457 / 1.788 / 1.510 | 1.01x / 1.24x / 1.05x | 1.400 (1.04x) | 1.402 (1.08x) |" in text,
       "the fp8 upcast table's row: the copy from its column, the default beside F.linear")
    ok(rs[1]["up_ms"] is None and "| 4608x3072x3072 | - / - / - / 0.135 | -x / -x / -x | - (-x) | - (-x) |" in text,
       "a shape without an fp8 upcast row")
    old, _ = parse([" 8192x 8192x 8192  fp8 upcast      1.432    767.8     0.000     0.000     0.000     0.000     0.000     0.000"
                    "     1.457    754.6    0.0000       0.00     1.431     1.500     1.440     1.400"])
    ok(old[(8192, 8192, 8192)]["fp8 upcast"].get("copy_e2e_ms") is None, "a run before the copy column parses")
    r_old = rows(old, peers)[0]
    ok(r_old["up_copy_ms"] == 1.457, "... and its default e2e stands for the copy (it was the copy then)")
    ok(text.count("\n") == 8, "one line a shape present in both runs, in each table")
    print(f"{passed} passed, {failed} failed")
    return failed == 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--check":
        sys.exit(0 if check() else 1)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        lwo, peers = parse(f)
    print()
    print(table(lwo, peers))


if __name__ == "__main__":
    main()
