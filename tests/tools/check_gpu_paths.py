#!/usr/bin/env python3
"""Every file a GPU run builds or reads is under the GPU stamp (tests/tools/gpu_stamp.py PATHS), so
the stamp cannot silently miss one. What the run uses is found, not listed: make's database of the
GPU targets (`make -pn`, every rule reachable from gpu-check's targets: the sources, the headers
make knows, the recipes), then, file by file, the paths each reached file names (a script's
`tests/...` and `$here/../..` paths, a C file's #include and its path literals) until nothing new
turns up. Then the other way: the CPU-only files (CPU tests, fuzzers, the Windows checks) stay out
of it. Ends with "N passed, N failed"."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gpu_stamp  # noqa: E402

GOALS = ["gpu-build", "build/warm_cache", "test-gpu", "bench", "bench-gemm", "bench-stream", "bench-dit", "demo", "gpu-check",
         "warm-cache"]
passed = failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", msg)


def repo_file(p, base=ROOT):
    full = os.path.normpath(os.path.join(base, p))
    # a file of the repository: not a build output, not git's
    if os.path.isfile(full) and full.startswith(ROOT + os.sep) and not full.startswith((os.path.join(ROOT, "build") + os.sep,
                                                                                        os.path.join(ROOT, ".git") + os.sep)):
        return os.path.relpath(full, ROOT).replace(os.sep, "/")
    return None


# make's database: rules (target -> prerequisites, recipe lines)
db = subprocess.run(["make", "-C", ROOT, "-pnB", "--no-print-directory"] + GOALS, capture_output=True, text=True).stdout
rules, cur = {}, None
for line in db.splitlines():
    if line.startswith("\t") and cur is not None:
        rules[cur][1].append(line[1:])
        continue
    m = re.match(r"^([^\s#:=][^:=]*?):(?!=)\s*(.*)$", line)
    if m and not line.startswith(("#", ".")) and "%" not in m.group(1):
        cur = m.group(1).strip()
        prereqs = m.group(2).replace("|", " ").split()
        old = rules.get(cur, ([], []))
        rules[cur] = (old[0] + prereqs, old[1])
    elif not line.strip():
        cur = None
check(all(g in rules for g in GOALS), "make's database has every GPU goal: missing %s" % [g for g in GOALS if g not in rules])

PATH_RE = re.compile(r"(?:\$here/|\$\(dirname \"\$0\"\)/)?(?:\.\./)*\b(?:tests|examples|tools)/[A-Za-z0-9_./-]+|\"[A-Za-z0-9_./-]+\.(?:h|c|cu|inc|py|sh)\"")
used, todo, seen_targets = set(), [], set()
stack = list(GOALS)
while stack:
    t = stack.pop()
    if t in seen_targets:
        continue
    seen_targets.add(t)
    prereqs, recipe = rules.get(t, ([], []))
    for p in prereqs:
        f = repo_file(p)
        if f:
            todo.append(f)
        elif p in rules:
            stack.append(p)
    for line in recipe:
        for tok in re.findall(r"[A-Za-z0-9_./$()-]+", line):
            f = repo_file(tok)
            if f:
                todo.append(f)
        for tok in re.findall(r"\bbuild/[A-Za-z0-9_]+\b", line):
            if tok in rules:
                stack.append(tok)
# the make files the Makefile includes (the GPU part, gpu.mk; the Makefile's own rules are the CPU's)
m = re.search(r"^MAKEFILE_LIST :?= (.*)$", db, re.M)
check(m is not None, "make's database names its make files")
todo += [f for f in (m.group(1).split() if m else []) if f != "Makefile" and repo_file(f)]
# the files those name, until no new one turns up (the stamp is the run's output, not its input)
while todo:
    f = todo.pop()
    if f in used or f == gpu_stamp.STAMP.replace(os.sep, "/"):
        continue
    used.add(f)
    if f.endswith((".safetensors", ".pt", ".png", ".f32")):
        continue
    try:
        text = open(os.path.join(ROOT, f), encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    base = os.path.dirname(os.path.join(ROOT, f))
    names = []
    if f.endswith((".c", ".h", ".cu", ".inc")):
        # code only: comments dropped (a string literal kept whole, a comment inside one too)
        code = re.sub(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*',
                      lambda m: m.group(0) if m.group(0).startswith('"') else " ", text, flags=re.S)
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', code, re.M):
            g = repo_file(inc, base)
            check(g is not None, "%s includes %s, which is not in the repository" % (f, inc))
            if g:
                todo.append(g)
        names = re.findall(r'"((?:examples|tests|tools)/[A-Za-z0-9_./-]+)"', code)
    elif f.endswith(".py"):
        # the modules it imports from its own folder, and the repository paths its strings name
        for mod in re.findall(r"^\s*(?:import|from)\s+([A-Za-z0-9_]+)", text, re.M):
            g = repo_file(mod + ".py", base)
            if g:
                todo.append(g)
        if f != "tests/tools/gpu_stamp.py":   # its selftest names CPU files as data
            names = re.findall(r"[\"']((?:examples|tests|tools)/[A-Za-z0-9_./-]+)[\"']", text)
    else:   # scripts and make files: every path outside comments, from the root or the script's folder
        code = "\n".join(re.sub(r"(^|\s)#.*$", "", l) for l in text.splitlines())
        names = [t.replace("$here/", "").replace('$(dirname "$0")/', "") for t in PATH_RE.findall(code)]
    for rel in names:
        rel = rel.strip('"')
        g = (repo_file(rel) if not rel.startswith("..") else None) or repo_file(rel, base)
        if g:
            todo.append(g)

covered = set(gpu_stamp.files())
for f in sorted(used):
    check(f in covered, "the GPU run uses %s, which the stamp does not cover (add it to tests/tools/gpu_stamp.py PATHS)" % f)
# what the search must find: a floor, so a broken search cannot pass by finding nothing
for f in ("lwo.h", "tests/check.h", "tests/gpu/gpu_check.sh", "tests/gpu/gpu.mk", "tests/gpu/test_gpu_gemm.c", "tests/bench/bench_gemm_table.py",
          "tests/gpu/score_demo.sh", "tools/train_tiny_dit.py", "examples/tiny_dit_lora.safetensors", "examples/dit_kernels.cu",
          "tests/tools/run.sh", "tests/tools/gpu_stamp.py", "tools/warm_cache.c"):
    check(f in used, "the search found %s among the files the GPU run uses" % f)
# the other way: CPU-only files stay out of the stamp
for f in ("tests/cpu/test_cpu.c", "tests/cpu/test_gemm.c", "tests/fuzz/fuzz_safetensors.c", "tests/windows/check_windows.sh",
          "tests/tools/check_layout.py", "tests/tools/check_gpu_paths.py", "Makefile", "README.md", "NOTES.md", "tests/gpu-verified.txt"):
    check(not gpu_stamp.covered(f), "%s is CPU-only (or the stamp itself) but the stamp covers it" % f)
print("  the GPU run uses %d files; the stamp covers %d" % (len(used), len(covered)))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
