#!/usr/bin/env python3
"""Writes the hostile inputs of issue 24 into tests/fuzz/corpus/safetensors/hostile_*: small files whose
headers claim far more than they hold (shapes of no elements with enormous dimensions, many keys,
long names, adversarial orders). The committed files are what the replay uses; this script is how
they were made (python3 tests/fuzz/gen_hostile_corpus.py [dir]). Standard library only."""
import json
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "safetensors")


def st(header, data=b"", raw=False):
    """A .safetensors file: 8-byte little-endian header length, the header, the data."""
    h = header if raw else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def keys(n):
    """n distinct short keys: base-62 numerals, the densest a header can hold."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = []
    for i in range(n):
        s = ""
        while True:
            s = digits[i % 62] + s
            i //= 62
            if not i:
                break
        out.append(s)
    return out


def meta_header(pairs):
    """A header of metadata only, written by hand so key order is exactly as given."""
    body = ",".join('"%s":"%s"' % (k, v) for k, v in pairs)
    return ('{"__metadata__":{%s}}' % body).encode()


FILES = {}

# Zero-element tensors with one enormous dimension: a few header bytes, no data. INT8 conversion
# must not allocate or loop per row (2^36 rows: 256 GiB of row scales).
FILES["hostile_empty_rows36"] = st({"w": entry("F32", [1 << 36, 0], 0, 0)})
FILES["hostile_empty_rows30"] = st({"w": entry("BF16", [1 << 30, 0], 0, 0)})
FILES["hostile_empty_rows62"] = st({"w": entry("F8_E4M3", [(1 << 63) - 1, 0], 0, 0)})
FILES["hostile_empty_8dims"] = st({"x.weight": entry("U8", [(1 << 63) - 1, 0, (1 << 63) - 1, 1, 1 << 40, 7, 0, 3], 0, 0)})
# ... as weights under each convention, so the loaders' CPU side sees them too
FILES["hostile_empty_lwo_int8"] = st({
    "__metadata__": {"lwo.quant": "int8-per-channel-v1"},
    "l.weight": entry("I8", [0, 1 << 40], 0, 0),
    "l.weight_scale": entry("F32", [0], 0, 0),
    "l.bias": entry("F64", [0], 0, 0),
})
FILES["hostile_empty_lwo_int8_lie"] = st({   # a bias claiming 2^43 bytes in none: rejected at open
    "__metadata__": {"lwo.quant": "int8-per-channel-v1"},
    "l.weight": entry("I8", [1 << 40, 0], 0, 0),
    "l.bias": entry("F64", [1 << 40], 0, 0),
})
FILES["hostile_empty_scaled_fp8"] = st({
    "scaled_fp8": entry("F8_E4M3", [0], 0, 0),
    "m.weight": entry("F8_E4M3", [1 << 36, 0], 0, 0),
    "m.scale_weight": entry("F32", [], 0, 4),
    "m.bias": entry("F32", [0], 4, 4),
}, b"\x00\x00\x80\x3f")
cq = b'{"format":"float8_e4m3fn"}'
FILES["hostile_empty_comfy_quant"] = st({
    "c.weight": entry("F8_E4M3", [1 << 33, 0], 0, 0),
    "c.comfy_quant": entry("U8", [len(cq)], 0, len(cq)),
    "c.weight_scale": entry("F32", [], len(cq), len(cq) + 4),
}, cq + b"\x00\x00\x80\x3f")
# an empty tensor of a few rows (1 is allowed to convert to int8, 2 is not) beside real ones
FILES["hostile_empty_small"] = st({
    "a": entry("F32", [1, 0], 0, 0), "b": entry("F32", [2, 0], 0, 0), "c": entry("F32", [0, 5], 0, 0),
    "d": entry("F32", [0], 0, 0), "e": entry("F32", [2, 2], 0, 16)}, struct.pack("<4f", 1, -2, 3, 0.5))
# a tall, thin weight: per-row scales as large as the data allows (one per element)
FILES["hostile_tall_thin"] = st({"t.weight": entry("F16", [2048, 1], 0, 4096)}, b"\x00\x3c" * 2048)

# Many keys: 200,000 metadata keys (the open that took over 10 s), in ascending and in
# descending order; many tensors of no bytes; a duplicate key found only at the very end.
k200 = keys(200000)
FILES["hostile_meta_200k"] = st(meta_header((k, "") for k in k200), raw=True)
k20 = keys(20000)
FILES["hostile_meta_20k_desc"] = st(meta_header((k, "v") for k in sorted(k20, reverse=True)), raw=True)
FILES["hostile_meta_dup_last"] = st(meta_header([(k, "") for k in k20] + [(k20[0], "again")]), raw=True)
FILES["hostile_tensors_20k"] = st({"t" + k: entry("U8", [0], 0, 0) for k in k20})
# names sharing a long prefix: every comparison of the sort walks it
FILES["hostile_tensors_prefix"] = st({("p" * 2000) + k: entry("U8", [0], 0, 0) for k in keys(500)})

# Long strings: a 64 KiB weight name with lwo's int8 convention (its scale, smooth and bias are
# found whatever the length), a 256 KiB metadata value, a 64 KiB comfy_quant format string.
long = "n" * 65536
q = bytes([1, 255, 2, 254])
FILES["hostile_long_name_int8"] = st({
    "__metadata__": {"lwo.quant": "int8-per-channel-v1"},
    long + ".weight": entry("I8", [2, 2], 0, 4),
    long + ".weight_scale": entry("F32", [2], 4, 12),
    long + ".smooth": entry("F32", [2], 12, 20),
    long + ".bias": entry("F32", [2], 20, 28),
}, q + struct.pack("<6f", 0.5, 0.25, 1, 2, 0.125, -1))
FILES["hostile_long_meta_value"] = st({"__metadata__": {"v": "x" * (256 << 10)}})
cq_long = json.dumps({"format": "f" * 65536, "pad": [[[[[[]]]]]]}).encode()
FILES["hostile_long_comfy_format"] = st({
    "c.weight": entry("F8_E4M3", [1, 1], 0, 1),
    "c.comfy_quant": entry("U8", [len(cq_long)], 1, 1 + len(cq_long)),
}, b"\x38" + cq_long)
# escapes that decode to 4-byte UTF-8 from 12 bytes: the pool is sized by the header, not by them
FILES["hostile_escapes"] = st(('{"__metadata__":{"k":"%s"}}' % ("\\ud83d\\ude00" * 20000)).encode(), raw=True)

# Header length lies: just past the data, exactly the limit (100 MiB), 2^64 - 1.
small = json.dumps({"a": entry("U8", [1], 0, 1)}, separators=(",", ":")).encode()
for name, hl in (("hostile_hlen_plus1", len(small) + 2), ("hostile_hlen_cap", 100 << 20), ("hostile_hlen_max", (1 << 64) - 1)):
    FILES[name] = struct.pack("<Q", hl) + small + b"\x01"


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(FILES.items()):
        with open(os.path.join(OUT, name), "wb") as fh:
            fh.write(data)
        print("%-32s %8d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
