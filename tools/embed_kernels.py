#!/usr/bin/env python3
"""Write kernels.cuh.inc into lwo.h as a C string literal between the embed markers.

Usage: embed_kernels.py [--check]   (--check: exit 1 if lwo.h is stale, change nothing)
Standard library only. The literal is split into chunks under 4000 characters so every
C compiler accepts it (C99 only promises 4095 characters per string literal)."""
import os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "/* LWO_EMBED_BEGIN (tools/embed_kernels.py writes this block; edit kernels.cuh.inc) */\n"
END = "/* LWO_EMBED_END */\n"

def c_literal(src):
    out, chunk = [], ""
    for line in src.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\n", "\\n")
        esc = esc.replace("??", "?\\?")  # no trigraphs
        if len(chunk) + len(esc) > 3000:
            out.append(chunk); chunk = ""
        chunk += esc
    if chunk: out.append(chunk)
    body = "static const char *const lwo__kernel_source_parts[] = {\n"
    body += "".join('"%s",\n' % c for c in out)
    body += "};\n"
    return body

def main():
    check = "--check" in sys.argv[1:]
    with open(os.path.join(ROOT, "kernels.cuh.inc"), encoding="utf-8") as f: src = f.read()
    hp = os.path.join(ROOT, "lwo.h")
    with open(hp, encoding="utf-8") as f: h = f.read()
    a, b = h.find(BEGIN), h.find(END)
    if a < 0 or b < a:
        print("embed_kernels: markers not found in lwo.h", file=sys.stderr); return 2
    new = h[:a + len(BEGIN)] + c_literal(src) + h[b:]
    if check:
        if new != h:
            print("embed_kernels: lwo.h is stale; run `make embed`", file=sys.stderr); return 1
        return 0
    if new != h:
        tmp = hp + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f: f.write(new)
        os.replace(tmp, hp)
    return 0

if __name__ == "__main__":
    sys.exit(main())
