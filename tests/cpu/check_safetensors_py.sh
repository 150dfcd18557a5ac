#!/usr/bin/env bash
# Interop with the Python `safetensors` package: files it writes, lwo reads (build/st_dump dump);
# a file lwo writes (build/st_dump write), it reads. st_dump names dtypes as lwo_dtype_name does
# ("f32", "bf16", ...); Python's are the file's tags ("F32", "BF16", ...). Ends with "N passed, N failed".
set -u
PY=${LWO_PY:-build/venv/bin/python}
DUMP=${LWO_ST_DUMP:-build/st_dump}
dir=$(mktemp -d "${TMPDIR:-/tmp}/lwo-st-py.XXXXXX")
trap 'rm -rf "$dir"' EXIT
if [ ! -x "$DUMP" ]; then echo "FAIL $DUMP not built"; echo "0 passed, 1 failed"; exit 1; fi
"$PY" - "$DUMP" "$dir" <<'PYEOF'
import os, subprocess, sys
import numpy as np, ml_dtypes
import safetensors, safetensors.numpy as stnp

dump, d = sys.argv[1], sys.argv[2]
passed = failed = 0
def check(ok, msg):
    global passed, failed
    if ok: passed += 1
    else:
        failed += 1; print("FAIL", msg)
def fnv(b):
    h = 1469598103934665603
    for x in b: h = ((h ^ x) * 1099511628211) & 0xffffffffffffffff
    return "%016x" % h
def lwo_dump(*paths):
    r = subprocess.run([dump, "dump", *paths], capture_output=True, text=True)
    tensors, meta = {}, {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "error": return r.returncode, f[1], {}, {}
        if f[0] == "meta": meta[f[1]] = f[2]; continue
        tensors[f[0]] = (f[1], [int(x) for x in f[2].split(",") if x], int(f[3]), f[4])
    return r.returncode, "", tensors, meta

rng = np.random.default_rng(int(os.environ.get("LWO_TEST_SEED", "0")) or None)
names = {np.float64: "F64", np.float32: "F32", np.float16: "F16", ml_dtypes.bfloat16: "BF16",
         ml_dtypes.float8_e4m3fn: "F8_E4M3", ml_dtypes.float8_e5m2: "F8_E5M2", np.int64: "I64",
         np.int32: "I32", np.int16: "I16", np.int8: "I8", np.uint8: "U8", np.bool_: "BOOL"}
# the file's dtype tag -> lwo_dtype_name, what st_dump prints
lwo_name = {"F64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "F8_E4M3": "f8_e4m3", "F8_E5M2": "f8_e5m2",
            "I64": "i64", "I32": "i32", "I16": "i16", "I8": "i8", "U8": "u8", "BOOL": "bool"}
shapes = [(3, 5), (), (0, 4), (7,), (2, 1, 3, 1, 2)]
tensors = {}
for i, (dt, _) in enumerate(names.items()):
    for j, sh in enumerate(shapes):
        x = rng.standard_normal(sh) * 10
        if dt is np.bool_: a = x > 0
        else: a = x.astype(np.float32).astype(dt) if dt in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2) else x.astype(dt)
        tensors["model.diffusion_model.blocks.%d.attn.qkv.weight_%d" % (i, j)] = np.ascontiguousarray(a)
tensors["model.diffusion_model.final_layer.linear.bias"] = rng.standard_normal(16).astype(np.float32)
tensors["unicode.\u00fc\u65e5\U0001F600"] = np.arange(3, dtype=np.int32)
meta = {"format": "pt", "lwo.quant": "int8-per-channel-v1", "note": "\u00e9 \"quoted\" \\ \U0001F600"}
p = os.path.join(d, "py.safetensors")
stnp.save_file(tensors, p, metadata=meta)
rc, err, got, gmeta = lwo_dump(p)
check(rc == 0, "lwo opens the Python file: " + err)
check(len(got) == len(tensors), "tensor count %d vs %d" % (len(got), len(tensors)))
for k, a in tensors.items():
    g = got.get(k)
    check(g is not None, "lwo finds " + k)
    if g is None: continue
    check(g[0] == lwo_name[names[a.dtype.type]], "%s dtype %s vs %s" % (k, g[0], names[a.dtype.type]))
    check(g[1] == list(a.shape), "%s shape %s vs %s" % (k, g[1], list(a.shape)))
    check(g[2] == a.nbytes and g[3] == fnv(a.tobytes()), "%s bytes/checksum" % k)
check(gmeta == meta, "metadata %r vs %r" % (gmeta, meta))

# sharded: two files written by Python, read as one set
p0, p1 = os.path.join(d, "model-00001-of-00002.safetensors"), os.path.join(d, "model-00002-of-00002.safetensors")
stnp.save_file({"a.weight": np.ones((2, 2), np.float16)}, p0, metadata={"format": "pt"})
stnp.save_file({"b.weight": np.zeros((3,), ml_dtypes.bfloat16)}, p1, metadata={"format": "pt"})
rc, err, got, _ = lwo_dump(p0, p1)
check(rc == 0 and set(got) == {"a.weight", "b.weight"}, "shards: " + err)
rc, err, got, _ = lwo_dump(p0, p0)
check(rc != 0 and "a.weight" in err, "duplicate across shards is an error: " + err)

# the reverse: lwo writes, Python reads
q = os.path.join(d, "lwo.safetensors")
r = subprocess.run([dump, "write", q], capture_output=True, text=True)
check(r.returncode == 0, "lwo writes: " + r.stdout)
if r.returncode == 0:
    raw = open(q, "rb").read()
    hl = int.from_bytes(raw[:8], "little")
    check(hl % 8 == 0, "header padded to 8 (%d)" % hl)
    items = dict(safetensors.deserialize(raw))
    rc, err, mine, mmeta = lwo_dump(q)
    check(len(items) == len(mine) == 14, "Python reads %d tensors, lwo %d" % (len(items), len(mine)))
    for k, v in items.items():
        m = mine.get(k)
        check(m is not None and m[0] == lwo_name.get(v["dtype"]) and m[1] == list(v["shape"]) and m[3] == fnv(bytes(v["data"])),
              "Python and lwo agree on " + k)
    with safetensors.safe_open(q, framework="numpy") as f:
        check(f.metadata() == {"format": "pt", "lwo.note": "written by lwo \u00e9"}, "metadata via safe_open: %r" % f.metadata())
        k = "model.diffusion_model.blocks.%d.attn.qkv.weight" % 2   # F32
        a = f.get_tensor(k)
        exp = bytes(((i * 37 + 2 * 11) & 0xff) for i in range(96))
        check(a.dtype == np.float32 and a.shape == (4, 6, 1) and a.tobytes() == exp, "numpy F32 values")
        check(f.get_tensor("scalar").shape == () and f.get_tensor("empty").shape == (0,), "scalar and empty")
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PYEOF
rc=$?
# a Python that died before its summary line still fails the run
exit $rc
