#!/usr/bin/env python3
"""The GPU verification stamp (tests/gpu-verified.txt), standard library only.

  gpu_stamp.py paths                the files the stamp covers, one per line
  gpu_stamp.py hash                 the tree hash of those files
  gpu_stamp.py write TABLE GPU      write the stamp: that hash, the date, the GPU and TABLE's text
  gpu_stamp.py check [STAMP]        parse a stamp (format only) and say whether it is current
  gpu_stamp.py part TABLE GPU OUT   a partial stamp of some parts (GPU_CHECK_PARTS) to OUT
  gpu_stamp.py merge PART...        the stamp from partial stamps of this very tree that together
                                    passed every part (a gpu-check too long for one device call)
  gpu_stamp.py selftest             the parser against good and malformed stamps ("N passed, N failed")

The stamp covers exactly what decides a GPU run (PATHS): lwo.h and kernels.cuh.inc, the examples
(the demo's code, checkpoint and classifier), the header the tests share, the GPU tests and their
script and make rules (tests/gpu/, gpu.mk among them), the benchmarks and their Python peers
(tests/bench/), the runner and this file, and the two tools the GPU run calls (the cubin cache
filler, the demo's trainer, which score_demo.sh uses). CPU tests, fuzzers, the Windows checks, the
Makefile's CPU rules, the README and NOTES.md can change and the stamp stays current;
tests/tools/check_gpu_paths.py checks that every file the GPU run builds or reads is listed.

The hash is git's tree hash (the object format of `git write-tree`) of an index holding exactly
those files as they are on disk, every file as a plain blob (mode 100644: a copy that loses the
executable bit hashes the same), leaving out the stamp itself and Python's caches. So a stamp names
the exact sources a green `make gpu-check` ran, and anyone can recompute it on a CPU from a
checkout.
"""
import datetime
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = ["lwo.h", "kernels.cuh.inc", "examples", "tests/check.h", "tests/gpu", "tests/bench", "tests/tools/run.sh",
         "tests/tools/gpu_stamp.py", "tools/warm_cache.c", "tools/train_tiny_dit.py"]
STAMP = os.path.join("tests", "gpu-verified.txt")
SKIP_DIRS = {"__pycache__"}


def _obj(kind, body):
    return hashlib.sha1(b"%s %d\0" % (kind, len(body)) + body).digest()


def files(root=ROOT):
    """The covered files (relative, '/'-separated, sorted): PATHS with folders expanded."""
    out = []
    for p in PATHS:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            out.append(p)
        for base, dirs, names in os.walk(full):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            for n in names:
                rel = os.path.relpath(os.path.join(base, n), root).replace(os.sep, "/")
                if not n.endswith(".pyc") and rel != STAMP.replace(os.sep, "/"):
                    out.append(rel)
    return sorted(set(out))


def covered(rel):
    """Whether the file rel (relative to the root) is one the stamp covers."""
    rel = rel.replace(os.sep, "/")
    return any(rel == p or rel.startswith(p + "/") for p in PATHS) and rel != STAMP.replace(os.sep, "/")


def _tree(node):
    # git orders a tree's entries by name, a folder's name compared as if it ended in '/'
    body = b""
    for name in sorted(node, key=lambda n: n.encode() + (b"/" if isinstance(node[n], dict) else b"")):
        v = node[name]
        body += (b"40000 " if isinstance(v, dict) else b"100644 ") + name.encode() + b"\0" + (_tree(v) if isinstance(v, dict) else v)
    return _obj(b"tree", body)


def tree_hash(root=ROOT):
    top = {}
    for rel in files(root):
        node, parts = top, rel.split("/")
        for d in parts[:-1]:
            node = node.setdefault(d, {})
        with open(os.path.join(root, rel), "rb") as f:
            node[parts[-1]] = _obj(b"blob", f.read())
    return _tree(top).hex()


def _hash_path(rel):   # one folder's or file's git hash (the selftest's comparison with git)
    full = os.path.join(ROOT, rel)
    if os.path.isfile(full):
        with open(full, "rb") as f:
            return _obj(b"blob", f.read())
    top = {}
    for base, dirs, names in os.walk(full):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for n in names:
            node = top
            for d in os.path.relpath(base, full).split(os.sep):
                if d != ".":
                    node = node.setdefault(d, {})
            with open(os.path.join(base, n), "rb") as f:
                node[n] = _obj(b"blob", f.read())
    return _tree(top)


FILES_FIELD = " ".join(p + ("/" if "." not in os.path.basename(p) else "") for p in PATHS)   # folders end in /


FIELDS = ("tree", "files", "date", "gpu", "result")


def parse(text):
    """The stamp's fields and table rows; raises ValueError naming what is wrong."""
    fields, rows, in_table = {}, [], False
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if in_table:
            if not line.startswith("|"):
                raise ValueError("a table line that is not a row: %r" % line)
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3:
                raise ValueError("a table row with fewer than 3 cells: %r" % line)
            if set(cells[0]) <= set("-: ") or cells[0] == "part":
                continue
            rows.append(cells)
            continue
        if line.strip() == "table:":
            in_table = True
            continue
        m = re.match(r"^([a-z]+): (.+)$", line)
        if not m or m.group(1) not in FIELDS:
            raise ValueError("not a stamp line: %r" % line)
        if m.group(1) in fields:
            raise ValueError("field %s twice" % m.group(1))
        fields[m.group(1)] = m.group(2).strip()
    for k in FIELDS:
        if k not in fields:
            raise ValueError("no %s: field" % k)
    if not re.fullmatch(r"[0-9a-f]{40}", fields["tree"]):
        raise ValueError("tree is not 40 hex digits: %r" % fields["tree"])
    if fields["files"] != FILES_FIELD:
        raise ValueError("files is not the GPU-deciding set: %r" % fields["files"])
    try:
        datetime.datetime.strptime(fields["date"], "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise ValueError("date is not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ): %r" % fields["date"])
    if fields["result"] not in ("PASS", "FAIL"):
        raise ValueError("result is neither PASS nor FAIL: %r" % fields["result"])
    if not rows:
        raise ValueError("no table rows")
    for r in rows:
        if r[1] not in ("PASS", "FAIL"):
            raise ValueError("row %r: result %r is neither PASS nor FAIL" % (r[0], r[1]))
    if fields["result"] == "PASS" and any(r[1] != "PASS" for r in rows):
        raise ValueError("result PASS with a failed part")
    return fields, rows


# every row a whole gpu-check has (tests/gpu/gpu_check.sh); merged partial stamps must cover them all
ROWS = ("build test_gpu test_gpu_gemm test_gpu_graphs test_gpu_stream test_gpu_safetensors test_gpu_plan "
        "test_gpu_lora test_dit_selftest memcheck racecheck demo bench-dit bench bench-gemm bench-stream").split()


def stamp_text(table, gpu):
    rows = [l for l in table.splitlines() if l.startswith("|")]
    ok = all(("| PASS |" in l) for l in rows if not re.match(r"^\|\s*(part|-)", l))
    text = ("# lwo GPU verification stamp: written by `make gpu-check` (tests/gpu/gpu_check.sh) on a GPU machine.\n"
            "# tree: tests/tools/gpu_stamp.py hash of the files below at the time; recompute it on any machine.\n"
            "tree: %s\nfiles: %s\ndate: %s\ngpu: %s\nresult: %s\ntable:\n%s\n" % (
                tree_hash(), FILES_FIELD,
                datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), gpu.strip() or "unknown",
                "PASS" if ok and rows else "FAIL", table))
    parse(text)   # never write a stamp the checker would reject
    return text


def write(table_path, gpu, out=None):
    with open(table_path) as f:
        text = stamp_text(f.read().strip("\n"), gpu)
    with open(out or os.path.join(ROOT, STAMP), "w") as f:
        f.write(text)
    return parse(text)[0]


def merge(paths, out=None):
    """Writes the stamp from partial stamps; raises ValueError when they do not prove the tree green."""
    now, gpu, got = tree_hash(), None, {}
    for p in paths:
        with open(p) as f:
            fields, rows = parse(f.read())
        if fields["tree"] != now:
            raise ValueError("%s ran tree %s, this tree is %s" % (p, fields["tree"], now))
        if gpu is not None and fields["gpu"] != gpu:
            raise ValueError("%s ran on %s, another part on %s" % (p, fields["gpu"], gpu))
        gpu = fields["gpu"]
        for r in rows:
            if r[1] != "PASS":
                raise ValueError("%s: part %s failed" % (p, r[0]))
            got[r[0]] = r
    missing = [r for r in ROWS if r not in got]
    if missing:
        raise ValueError("no passing run of: %s" % " ".join(missing))
    table = "| part | result | seconds | headline |\n| --- | --- | --- | --- |\n" + "\n".join(
        "| " + " | ".join(got[r]) + " |" for r in ROWS)
    text = stamp_text(table, gpu)
    with open(out or os.path.join(ROOT, STAMP), "w") as f:
        f.write(text)
    return parse(text)[0]


def check(path):
    with open(path) as f:
        fields, rows = parse(f.read())
    now = tree_hash()
    print("stamp %s: %s on %s, %s, %d parts; tree %s (%s)" % (path, fields["result"], fields["gpu"], fields["date"], len(rows), fields["tree"],
          "current" if now == fields["tree"] else "the files changed since: now " + now))
    return fields


def selftest():
    good = ("tree: %s\nfiles: " + FILES_FIELD + "\ndate: 2026-12-04T15:00:00Z\ngpu: NVIDIA H200\n"
            "result: PASS\ntable:\n| part | result | seconds | headline |\n| --- | --- | --- | --- |\n| build | PASS | 12 | ok |\n") % ("0" * 40)
    bad = {
        "a short hash": good.replace("0" * 40, "0" * 39),
        "no gpu": good.replace("gpu: NVIDIA H200\n", ""),
        "a local date": good.replace("15:00:00Z", "15:00:00"),
        "another file set": good.replace(FILES_FIELD, "lwo.h kernels.cuh.inc examples/ tests/ Makefile"),
        "a failed part under PASS": good.replace("| build | PASS |", "| build | FAIL |"),
        "an unknown result": good.replace("result: PASS", "result: GREEN"),
        "no rows": good.split("| build")[0],
        "a stray line": good.replace("gpu:", "GPU:"),
        "a field twice": good.replace("result: PASS\n", "result: PASS\nresult: PASS\n"),
    }
    passed = failed = 0
    try:
        parse(good)
        passed += 1
    except ValueError as e:
        print("FAIL the good stamp: %s" % e)
        failed += 1
    for name, text in bad.items():
        try:
            parse(text)
            print("FAIL %s was accepted" % name)
            failed += 1
        except ValueError:
            passed += 1
    h1, h2 = tree_hash(), tree_hash()
    if re.fullmatch(r"[0-9a-f]{40}", h1) and h1 == h2:
        passed += 1
    else:
        print("FAIL tree hash %r / %r" % (h1, h2))
        failed += 1
    # git's own hash of a tree (if this is a clean git checkout): the same algorithm must agree
    try:
        import subprocess
        clean = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "examples", "lwo.h", "kernels.cuh.inc", "Makefile"],
                               capture_output=True, text=True, check=True).stdout.strip() == ""
        if clean:
            for p in ("examples", "lwo.h"):
                want = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD:" + p], capture_output=True, text=True, check=True).stdout.strip()
                got = _hash_path(p).hex()
                modes = subprocess.run(["git", "-C", ROOT, "ls-tree", "-r", "HEAD", p], capture_output=True, text=True, check=True).stdout
                if "100755" in modes:
                    continue   # git keeps the executable bit; the stamp does not
                if got == want:
                    passed += 1
                else:
                    print("FAIL %s: our tree hash %s, git's %s" % (p, got, want))
                    failed += 1
    except (OSError, subprocess.CalledProcessError):
        print("  (no git checkout: the comparison with git's hash is skipped)")
    # the whole hash against git's: an index of exactly the covered files (as git holds them at
    # HEAD, mode 100644) written as a tree, where those files are clean
    try:
        import subprocess
        import tempfile
        names = files()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--"] + PATHS, capture_output=True, text=True,
                               check=True).stdout.strip()
        if not dirty:
            staged = subprocess.run(["git", "-C", ROOT, "ls-files", "-s", "--"] + PATHS, capture_output=True, text=True, check=True).stdout
            info = "".join("100644 %s\t%s\n" % (l.split()[1], l.split("\t", 1)[1]) for l in staged.splitlines()
                           if l.split("\t", 1)[1] in names)
            with tempfile.TemporaryDirectory() as d:
                env = dict(os.environ, GIT_INDEX_FILE=os.path.join(d, "index"))
                subprocess.run(["git", "-C", ROOT, "update-index", "--add", "--index-info"], input=info, text=True, env=env, check=True)
                want = subprocess.run(["git", "-C", ROOT, "write-tree"], capture_output=True, text=True, env=env, check=True).stdout.strip()
            if want == tree_hash():
                passed += 1
            else:
                print("FAIL the stamp's tree hash %s, git's write-tree of the same %d files %s" % (tree_hash(), len(names), want))
                failed += 1
    except (OSError, subprocess.CalledProcessError) as e:
        print("  (no git checkout: the comparison with git's write-tree is skipped: %s)" % e)
    # the narrowing: in a copy of the covered files and a few others, editing a CPU test, a fuzz
    # file, the README, NOTES.md or the Makefile keeps the hash; editing a covered file changes it
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        others = ["tests/cpu/test_cpu.c", "tests/fuzz/fuzz_safetensors.c", "tests/windows/check_windows.sh", "README.md", "NOTES.md",
                  "Makefile"]
        for rel in files() + others:
            if os.path.exists(os.path.join(ROOT, rel)):
                os.makedirs(os.path.dirname(os.path.join(d, rel)) or d, exist_ok=True)
                shutil.copyfile(os.path.join(ROOT, rel), os.path.join(d, rel))
        h0 = tree_hash(d)
        ok = h0 == tree_hash()
        for rel in others:
            with open(os.path.join(d, rel), "a") as f:
                f.write("\n/* an edit */\n")
            ok = ok and tree_hash(d) == h0 and not covered(rel)
        for rel in ("lwo.h", "tests/gpu/gpu.mk", "tests/bench/bench_gemm_table.py", "tests/check.h"):
            with open(os.path.join(d, rel), "a") as f:
                f.write("\n")
            h1 = tree_hash(d)
            ok = ok and h1 != h0 and covered(rel)
            h0 = h1
        if ok:
            passed += 1
        else:
            print("FAIL the stamp does not cover exactly the GPU files: an edit outside changed the hash, or one inside did not")
            failed += 1
    # merging partial stamps: all rows of this tree pass; a missing row, a failed row or another tree refuse
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        def part(name, rows, tree=None):
            table = "| part | result | seconds | headline |\n| --- | --- | --- | --- |\n" + "\n".join(
                "| %s | %s | 1 | x |" % (r, res) for r, res in rows)
            path = os.path.join(d, name)
            write_text = stamp_text(table, "NVIDIA H200")
            if tree:
                write_text = write_text.replace(tree_hash(), tree)
            with open(path, "w") as f:
                f.write(write_text)
            return path
        half = len(ROWS) // 2
        a = part("a", [(r, "PASS") for r in ROWS[:half]])
        b = part("b", [(r, "PASS") for r in ROWS[half:]])
        cases = [("two halves", [a, b], True), ("one half", [a], False),
                 ("a failed row", [a, part("c", [(r, "PASS") for r in ROWS[half:-1]] + [(ROWS[-1], "FAIL")])], False),
                 ("another tree", [a, part("t", [(r, "PASS") for r in ROWS[half:]], "1" * 40)], False),
                 ("a failure overridden by a later pass", [part("f", [(ROWS[0], "FAIL")]), a, b], False)]
        for name, paths, want in cases:
            try:
                f = merge(paths, os.path.join(d, "stamp"))
                ok = want and f["result"] == "PASS" and len(parse(open(os.path.join(d, "stamp")).read())[1]) == len(ROWS)
            except ValueError:
                ok = not want
            passed += ok
            failed += not ok
            if not ok:
                print("FAIL merge of %s: %s" % (name, "refused" if want else "accepted"))
    if os.path.exists(os.path.join(ROOT, STAMP)):
        try:
            check(os.path.join(ROOT, STAMP))
            passed += 1
        except ValueError as e:
            print("FAIL the committed stamp does not parse: %s" % e)
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return failed == 0


def main(argv):
    if len(argv) == 2 and argv[1] == "paths":
        print("\n".join(files()))
        return 0
    if len(argv) >= 2 and argv[1] == "hash":
        print(tree_hash())
        return 0
    if len(argv) == 4 and argv[1] == "write":
        f = write(argv[2], argv[3])
        print("stamp %s: %s, tree %s" % (STAMP, f["result"], f["tree"]))
        return 0 if f["result"] == "PASS" else 1
    if len(argv) == 5 and argv[1] == "part":
        f = write(argv[2], argv[3], argv[4])
        print("partial stamp %s: %s, tree %s" % (argv[4], f["result"], f["tree"]))
        return 0 if f["result"] == "PASS" else 1
    if len(argv) >= 3 and argv[1] == "merge":
        try:
            f = merge(argv[2:])
        except (ValueError, OSError) as e:
            print("merge: %s" % e)
            return 1
        print("stamp %s: %s, tree %s, from %d partial runs" % (STAMP, f["result"], f["tree"], len(argv) - 2))
        return 0
    if len(argv) in (2, 3) and argv[1] == "check":
        try:
            check(argv[2] if len(argv) == 3 else os.path.join(ROOT, STAMP))
        except (ValueError, OSError) as e:
            print("stamp: %s" % e)
            return 1
        return 0
    if len(argv) == 2 and argv[1] == "selftest":
        return 0 if selftest() else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
