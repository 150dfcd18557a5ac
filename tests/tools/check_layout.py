#!/usr/bin/env python3
"""lwo.h's layering, checked (issue 20): the implementation's sections are numbered in order and
match the table of contents; no function of the implementation is declared before it is defined
(so no section calls one below it: C99 and C++ refuse an undeclared call); every public function
is declared in the public section of the number of the section that defines it, in the same
order as the sections; no section is over 1,300 lines. And tests/'s layout (issue 43): each file in
the folder that says where it runs (cpu/, gpu/, bench/, fuzz/, windows/, tools/), each test program
built and run by its folder's rules. Ends with "N passed, N failed"."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, '..', '..', 'lwo.h')
src = open(PATH, encoding='utf-8').read()
passed = failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print('FAIL', msg)


lines = src.split('\n')
impl_at = next(i for i, l in enumerate(lines) if l.startswith('#ifdef LWO_IMPLEMENTATION'))
banner = re.compile(r'^/\* ==== (Public API )?(\d+)\. ([^=]*?) =+ \*/$')
public, impl = [], []          # (line index, number, title)
for i, l in enumerate(lines):
    m = banner.match(l)
    if m:
        (public if m.group(1) else impl).append((i, int(m.group(2)), m.group(3).strip()))

# the implementation's sections: 0, 1, 2, ... in order, each under 1,300 lines
nums = [n for _, n, _ in impl]
check(nums == list(range(len(nums))) and len(nums) >= 10, 'implementation sections numbered 0..N in order: %s' % nums)
check(all(i > impl_at for i, _, _ in impl), 'every implementation banner is inside LWO_IMPLEMENTATION')
ends = [i for i, _, _ in impl[1:]] + [next(i for i, l in enumerate(lines) if l.startswith('#endif /* LWO_IMPLEMENTATION_DONE */'))]
for (i, n, t), e in zip(impl, ends):
    check(e - i <= 1300, 'section %d (%s) is %d lines, over 1,300' % (n, t, e - i))

# the table of contents names each section, by number, in order
toc = re.search(r'CONTENTS[^\n]*\n(.*?)\n\n', src, re.S)
check(toc is not None, 'a CONTENTS block in the top comment')
if toc:
    entries = re.findall(r'^\s+(\d+)\. (\S[^.]*?) \.', toc.group(1), re.M)
    check([int(n) for n, _ in entries] == nums, 'the table of contents lists sections %s; the code has %s' % ([int(n) for n, _ in entries], nums))
    for (n, name), (_, m, title) in zip(entries, impl):
        first = name.split()[0].rstrip(',')
        check(first.lower() in title.lower(), 'contents entry %s "%s" matches the banner "%s"' % (n, name, title))

# public sections: numbers ascending, each one an implementation section
pnums = [n for _, n, _ in public]
check(pnums == sorted(pnums) and len(set(pnums)) == len(pnums), 'public sections in ascending order: %s' % pnums)
check(set(pnums) <= set(nums), 'every public section number is an implementation section: %s' % pnums)


def section_of(idx, table):
    n = None
    for i, m, _ in table:
        if i <= idx:
            n = m
    return n


# no declaration before a definition inside the implementation
code = '\n'.join(lines[impl_at:])
decl = re.compile(r'^(?:static|LWO_DEF)\s[^;{=]*?\b(lwo_?\w+)\s*\([^;{]*\)\s*;', re.M)
found = [m.group(1) for m in decl.finditer(code)]
check(not found, 'no function declared ahead of its definition in the implementation: %s' % found)

# each public function: declared in public section N, defined in implementation section N
defn = re.compile(r'^LWO_DEF\s[^;{=]*?\b(lwo_\w+)\s*\(', re.M)
defined = {}
offset = 0
for k, l in enumerate(lines):
    if k < impl_at:
        continue
    m = defn.match(l)
    if m:
        defined[m.group(1)] = section_of(k, impl)
api = re.compile(r'^LWO_API\s[^;{=]*?\b(lwo_\w+)\s*\(')
order = []
for k, l in enumerate(lines[:impl_at]):
    m = api.match(l)
    if not m:
        continue
    name, pub = m.group(1), section_of(k, public)
    check(name in defined, '%s is declared but not defined' % name)
    if name in defined:
        check(defined[name] == pub, '%s is declared in public section %s but defined in section %s' % (name, pub, defined[name]))
    order.append(name)
missing = sorted(set(defined) - set(order))
check(not missing, 'every LWO_DEF function is declared in the public block: %s' % missing)

# ---- tests/: the folder says where a file runs ----
TESTS = os.path.join(HERE, '..')
TOP_OK = {'check.h', 'gpu-verified.txt', 'requirements.txt'}
FOLDERS = {'cpu', 'gpu', 'bench', 'fuzz', 'windows', 'tools'}
for name in sorted(os.listdir(TESTS)):
    full = os.path.join(TESTS, name)
    if os.path.isdir(full):
        check(name in FOLDERS or name == '__pycache__', 'tests/%s: a folder outside %s' % (name, sorted(FOLDERS)))
    else:
        check(name in TOP_OK, 'tests/%s: a loose file at the top of tests/ (only %s belong there)' % (name, sorted(TOP_OK)))
def ls(folder):
    d = os.path.join(TESTS, folder)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []
makefile = open(os.path.join(HERE, '..', '..', 'Makefile'), encoding='utf-8').read()
gpumk = open(os.path.join(TESTS, 'gpu', 'gpu.mk'), encoding='utf-8').read()
gpucheck = open(os.path.join(TESTS, 'gpu', 'gpu_check.sh'), encoding='utf-8').read()
cpu_tests = re.search(r'^CPU_TESTS\s*:=\s*(.*)$', makefile, re.M)
cpu_tests = cpu_tests.group(1).split() if cpu_tests else []
check(bool(cpu_tests), 'the Makefile lists CPU_TESTS')
for name in ls('cpu'):
    check(not name.startswith(('test_gpu', 'bench')), 'tests/cpu/%s: a GPU test or benchmark among the CPU tests' % name)
    m = re.match(r'^test_(\w+)\.c$', name)
    if m:
        t = m.group(1)
        check(t in cpu_tests or ('tests/cpu/%s' % name) in makefile, 'tests/cpu/%s is built by the Makefile (CPU_TESTS or a rule)' % name)
    elif name.endswith(('.sh', '.py')) and name.startswith('check_'):
        check(('tests/cpu/%s' % name) in makefile or any(('cpu/%s' % name) in open(os.path.join(TESTS, 'cpu', o), encoding='utf-8').read()
                                                         for o in ls('cpu') if o.endswith('.sh')),
              'tests/cpu/%s runs in make test' % name)
for name in ls('gpu'):
    m = re.match(r'^(test_\w+)\.c$', name)
    if m:
        check(('$(B)/%s' % m.group(1)) in gpumk, 'tests/gpu/%s is in gpu.mk\'s GPU_TESTS' % name)
        check(re.search(r'\b%s\b' % m.group(1), gpucheck.split('TESTS=', 1)[-1].split('\n', 1)[0]) is not None,
              'tests/gpu/%s runs in gpu_check.sh (TESTS)' % name)
for name in ls('bench'):
    check(name.startswith('bench'), 'tests/bench/%s: a benchmark or its peer is named bench*' % name)
    if name.endswith('.c'):
        check(('tests/bench/%s' % name) in gpumk, 'tests/bench/%s is built by gpu.mk' % name)
for name in ls('fuzz'):
    check(name == 'corpus' or 'fuzz' in name or 'corpus' in name, 'tests/fuzz/%s belongs with the fuzzers' % name)
check(not [n for n in ls('gpu') + ls('tools') if re.match(r'^gpu_(run|quick)\.sh$', n)], 'one GPU script (tests/gpu/gpu_check.sh), not three')
check('include tests/gpu/gpu.mk' in makefile, 'the Makefile includes the GPU part, tests/gpu/gpu.mk')

print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
