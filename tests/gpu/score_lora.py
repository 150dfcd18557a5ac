#!/usr/bin/env python3
"""The demo's LoRA, measured: per-class mean pixel of the demo's samples without and with the LoRA.

  score_lora.py BASE.f32 LORA.f32 LORA.safetensors [--per-class 10]

The LoRA file names its class (metadata lwo.lora_class): that class must change clearly (its mean
pixel moves by at least 0.5 on the [-1, 1] scale, and at least 4 times as far as any other class's)
and every other class little (at most 0.25: the PyTorch reference moves them by up to 0.13, ankle
boots the most).
Prints a table and exits 1 when either fails. numpy and the standard library only.
"""
import json
import struct
import sys

import numpy as np


def lora_class(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n)).get("__metadata__", {})
    return int(meta["lwo.lora_class"])


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    per = int(argv[argv.index("--per-class") + 1]) if "--per-class" in argv else 10
    base = np.fromfile(argv[1], dtype="<f4").reshape(-1, 28, 28)
    lora = np.fromfile(argv[2], dtype="<f4").reshape(-1, 28, 28)
    k = lora_class(argv[3])
    if base.shape != lora.shape or base.shape[0] % per:
        print("score_lora: %s and %s hold %d and %d samples" % (argv[1], argv[2], base.shape[0], lora.shape[0]))
        return 1
    classes = base.shape[0] // per
    mb = base.reshape(classes, -1).mean(axis=1)
    ml = lora.reshape(classes, -1).mean(axis=1)
    print("class  mean pixel without  with LoRA  change")
    for c in range(classes):
        print("%5d  %18.3f  %9.3f  %+6.3f%s" % (c, mb[c], ml[c], ml[c] - mb[c], "  <- the LoRA's class" if c == k else ""))
    moved = abs(ml[k] - mb[k])
    others = max((abs(ml[c] - mb[c]) for c in range(classes) if c != k), default=0.0)
    ok = moved >= 0.5 and others <= 0.25 and moved >= 4 * others
    print("lora class %d moved %.3f (>= 0.5), the others at most %.3f (<= 0.25, a quarter of it): %s" % (k, moved, others, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
