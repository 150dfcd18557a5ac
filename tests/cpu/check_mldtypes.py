"""Cross-check lwo's fp8 / bf16 / f16 CPU codecs against ml_dtypes and numpy (independent
implementations). ml_dtypes maps values past the fp8 range to NaN where lwo saturates, so the
encoder is compared on inputs clipped to the finite range first."""
import os, subprocess, sys, tempfile
import numpy as np, ml_dtypes

def main():
    exe = sys.argv[1]
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    bits = rng.integers(0, 2**32, size=200000, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x00000001, 0x7f7fffff, 0x477fe000, 0x477ff000,
                         0x33000000, 0x33000001, 0x387fc000, 0x3f808000, 0x3f818000], dtype=np.uint32)
    # every halfway point between neighbouring bf16 values exercises ties-to-even
    halves = ((np.arange(0, 65536, 7, dtype=np.uint32) << 16) | 0x8000).astype(np.uint32)
    bits = np.concatenate([specials, halves, bits])
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.f32"), os.path.join(d, "out.bin")
        bits.tofile(fin)
        subprocess.run([exe, fin, fout], check=True)
        raw = np.fromfile(fout, dtype=np.uint8)
    passed = failed = 0
    def check(ok, what):
        nonlocal passed, failed
        if ok: passed += 1
        else: failed += 1; print("FAIL", what)
    dec = raw[:2048].view(np.float32)
    enc = raw[2048:2048 + 131072]
    conv = raw[2048 + 131072:].view(np.uint16).reshape(-1, 2)
    codes = np.arange(256, dtype=np.uint8)
    for k, (name, t, mx) in enumerate([("e4m3fn", ml_dtypes.float8_e4m3fn, 448.0), ("e5m2", ml_dtypes.float8_e5m2, 57344.0)]):
        want = codes.view(t).astype(np.float32)
        got = dec[k * 256:(k + 1) * 256]
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        check(same.all(), f"{name} decode differs at codes {np.nonzero(~same)[0][:8]}")
        x = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
        xc = np.where(np.isnan(x), x, np.clip(x, -mx, mx)).astype(np.float32)
        want_e = xc.astype(t).view(np.uint8)
        got_e = enc[k * 65536:(k + 1) * 65536]
        nan = np.isnan(x)
        same = (got_e == want_e) | (nan & ((got_e & 0x7f) >= (0x7f if k == 0 else 0x7d)))
        check(same.all(), f"{name} encode of bf16 differs at {np.nonzero(~same)[0][:8]} "
              f"(got {got_e[~same][:8]}, want {want_e[~same][:8]})")
    f = bits.view(np.float32)
    wb = f.astype(ml_dtypes.bfloat16).view(np.uint16)
    wh = f.astype(np.float16).view(np.uint16)
    nan = np.isnan(f)
    okb = (conv[:, 0] == wb) | (nan & ((conv[:, 0] & 0x7fff) > 0x7f80))
    okh = (conv[:, 1] == wh) | (nan & ((conv[:, 1] & 0x7fff) > 0x7c00))
    check(okb.all(), f"f32->bf16 differs for {np.count_nonzero(~okb)} inputs, e.g. {bits[~okb][:4]}")
    check(okh.all(), f"f32->f16 differs for {np.count_nonzero(~okh)} inputs, e.g. {bits[~okh][:4]}")
    print(f"compared {len(bits)} f32 values, 512 fp8 codes, 131072 bf16->fp8 encodings with ml_dtypes {ml_dtypes.__version__}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
