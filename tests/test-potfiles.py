#!/usr/bin/env python3
# Every source file with user-visible strings is listed in po/POTFILES.in, the
# list is sorted, and every listed file exists; no translatable string is built
# with a GLib format macro that xgettext cannot read. Prints TAP.
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

# A msgid built with one of GLib's format macros (_("%" G_GUINT64_FORMAT …))
# is cut at the "%" by xgettext, which cannot expand the macro, so the string
# is never translated; <inttypes.h>'s PRIu64 and friends it understands.
glib_macro = re.compile(r'\b(?:_|N_|C_|NC_)\s*\((?:\s*"(?:[^"\\\n]|\\.)*")+\s*G_G?[A-Z0-9]*_FORMAT\b')
macro_msgids = []
for rel in listed:
    if not rel.endswith('.c') or not os.path.exists(os.path.join(root, rel)):
        continue
    with open(os.path.join(root, rel), encoding='utf-8') as f:
        text = f.read()
    for found in glib_macro.finditer(text):
        macro_msgids.append('%s:%d' % (rel, text.count('\n', 0, found.start()) + 1))
tests.append(('no translatable string uses a G_*_FORMAT macro (PRIu64 instead)',
              not macro_msgids, ', '.join(macro_msgids)))

print('1..%d' % len(tests))
ok = True
for i, (name, passed, detail) in enumerate(tests, 1):
    print('%s %d - %s' % ('ok' if passed else 'not ok', i, name))
    if not passed:
        ok = False
        print('# ' + detail)
sys.exit(0 if ok else 1)
