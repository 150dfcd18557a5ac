#!/usr/bin/env python3
"""lwo.h's layering, checked (issue 20): the implementation's sections are numbered in order and
match the table of contents; no function of the implementation is declared before it is defined
(so no section calls one below it: C99 and C++ refuse an undeclared call); every public function
is declared in the public section of the number of the section that defines it, in the same
order as the sections; no section is over 1,300 lines. Ends with "N passed, N failed"."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, '..', 'lwo.h')
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

print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
