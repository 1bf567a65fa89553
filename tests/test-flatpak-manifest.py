#!/usr/bin/env python3
# Checks the Flatpak manifests offline: they parse, name the app and its
# command, target org.gnome.Platform, keep finish-args to the allowed set
# (shared/STYLE.md §17: network, ipc, wayland, fallback-x11, dri; no host
# files), build this tree with meson, and, where flatpak-builder is installed,
# pass `flatpak-builder --show-manifest` with no WARNING (it exits 0 even on
# unknown keys). Prints TAP.
import json
import os
import shutil
import subprocess
import sys

root = sys.argv[1]
allowed = {'--share=network', '--share=ipc', '--socket=wayland',
           '--socket=fallback-x11', '--device=dri'}
results = []

for name, app_id in (('io.github.daisychain.DaisyChain.json', 'io.github.daisychain.DaisyChain'),
                     ('io.github.daisychain.DaisyChain.Devel.json',
                      'io.github.daisychain.DaisyChain.Devel')):
    path = os.path.join(root, 'flatpak', name)
    try:
        with open(path, encoding='utf-8') as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        results.append((name + ' parses', False, str(e)))
        continue
    results.append((name + ' parses', True, ''))
    results.append((name + ' app id', m.get('id') == app_id, repr(m.get('id'))))
    results.append((name + ' command', m.get('command') == 'daisychain', repr(m.get('command'))))
    results.append((name + ' runtime', m.get('runtime') == 'org.gnome.Platform'
                    and m.get('sdk') == 'org.gnome.Sdk', repr(m.get('runtime'))))
    extra = set(m.get('finish-args', [])) - allowed
    results.append((name + ' finish-args', not extra, ', '.join(sorted(extra))))
    last = (m.get('modules') or [{}])[-1]
    ok = (last.get('name') == 'daisychain' and last.get('buildsystem') == 'meson'
          and {'type': 'dir', 'path': '..'} in last.get('sources', []))
    results.append((name + ' builds this tree with meson', ok, repr(last)))
    builder = shutil.which('flatpak-builder')
    if builder:
        p = subprocess.run([builder, '--show-manifest', path], capture_output=True,
                           text=True, timeout=60)
        bad = p.returncode != 0 or 'WARNING' in p.stderr
        results.append((name + ' flatpak-builder --show-manifest', not bad, p.stderr.strip()))
    else:
        results.append((name + ' flatpak-builder --show-manifest', None,
                        'flatpak-builder is not installed'))

print('1..%d' % len(results))
failed = False
for i, (label, passed, detail) in enumerate(results, 1):
    if passed is None:
        print('ok %d - %s # SKIP %s' % (i, label, detail))
    elif passed:
        print('ok %d - %s' % (i, label))
    else:
        failed = True
        print('not ok %d - %s' % (i, label))
        for line in detail.splitlines():
            print('# ' + line)
sys.exit(1 if failed else 0)
