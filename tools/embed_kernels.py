#!/usr/bin/env python3
"""Write kernels.cuh.inc into lwo.h as a C string literal between the embed markers.

Usage: embed_kernels.py [--check] [SOURCE HEADER ARRAY]
  (--check: exit 1 if the header is stale, change nothing). Default: kernels.cuh.inc into lwo.h
  as lwo__kernel_source_parts; the examples use it for their own kernels, e.g.
  examples/dit_kernels.cu into examples/dit_common.h as dit_kernel_source_parts.
Standard library only. The literal is split into chunks under 4000 characters so every
C compiler accepts it (C99 only promises 4095 characters per string literal)."""
import os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "/* LWO_EMBED_BEGIN"  # the rest of the marker line names the file to edit
END = "/* LWO_EMBED_END */\n"

def c_literal(src, array="lwo__kernel_source_parts"):
    out, chunk = [], ""
    for line in src.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\n", "\\n")
        esc = esc.replace("??", "?\\?")  # no trigraphs
        if len(chunk) + len(esc) > 3000:
            out.append(chunk); chunk = ""
        chunk += esc
    if chunk: out.append(chunk)
    body = "static const char *const %s[] = {\n" % array
    body += "".join('"%s",\n' % c for c in out)
    body += "};\n"
    return body

def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = len(args) != len(sys.argv) - 1
    if args and len(args) != 3:
        print("usage: embed_kernels.py [--check] [SOURCE HEADER ARRAY]", file=sys.stderr); return 2
    srcp, hp, array = (args if args else ["kernels.cuh.inc", "lwo.h", "lwo__kernel_source_parts"])
    srcp, hp = os.path.join(ROOT, srcp), os.path.join(ROOT, hp)
    with open(srcp, encoding="utf-8") as f: src = f.read()
    with open(hp, encoding="utf-8") as f: h = f.read()
    a, b = h.find(BEGIN), h.find(END)
    a = h.find("\n", a) if a >= 0 else -1
    if a < 0 or b < a:
        print("embed_kernels: markers not found in %s" % hp, file=sys.stderr); return 2
    new = h[:a + 1] + c_literal(src, array) + h[b:]
    if check:
        if new != h:
            print("embed_kernels: %s is stale; run `make embed`" % os.path.relpath(hp, ROOT), file=sys.stderr); return 1
        return 0
    if new != h:
        tmp = hp + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f: f.write(new)
        os.replace(tmp, hp)
    return 0

if __name__ == "__main__":
    sys.exit(main())
