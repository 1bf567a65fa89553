#!/usr/bin/env python3
# Every source file with user-visible strings is listed in po/POTFILES.in, the
# list is sorted, and every listed file exists. Prints TAP.
import os
import re
import sys

root = sys.argv[1]
listed = []
with open(os.path.join(root, 'po', 'POTFILES.in'), encoding='utf-8') as f:
    for line in f:
        line = line.strip()
        if line and not line.startswith('#'):
            listed.append(line)

marks = re.compile(r'\b(_|N_|C_|NC_|ngettext|g_dngettext)\s*\(|translatable="yes"')
needed = []
for top in ('src', 'data'):
    for dirpath, _dirs, files in os.walk(os.path.join(root, top)):
        for name in files:
            if not name.endswith(('.c', '.ui', '.in')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding='utf-8') as f:
                text = f.read()
            if rel.startswith('data/') or marks.search(text):
                needed.append(rel)

tests = []
tests.append(('POTFILES.in is sorted', listed == sorted(listed), ''))
missing_files = [p for p in listed if not os.path.exists(os.path.join(root, p))]
tests.append(('every listed file exists', not missing_files, ', '.join(missing_files)))
unlisted = sorted(set(needed) - set(listed))
tests.append(('every file with translatable strings is listed', not unlisted, ', '.join(unlisted)))

print('1..%d' % len(tests))
ok = True
for i, (name, passed, detail) in enumerate(tests, 1):
    print('%s %d - %s' % ('ok' if passed else 'not ok', i, name))
    if not passed:
        ok = False
        print('# ' + detail)
sys.exit(0 if ok else 1)
