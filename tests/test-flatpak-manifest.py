#!/usr/bin/env python3
# Checks the Flatpak manifests offline (docs/INSTALL.md): they parse; the app
# id is the one meson.build gives data/ (the .Devel one builds with
# -Ddevelopment=true); they run `daisychain` on a numbered org.gnome.Platform
# and Sdk; finish-args are exactly network, ipc, wayland, fallback-x11 and dri
# (files only through portals); every source is pinned (a git commit, or a
# sha256 for archives and files), except this tree itself, built with meson;
# and, where flatpak-builder is installed, `flatpak-builder --show-manifest`
# prints no WARNING (it exits 0 even on unknown keys). Every shader that
# uses #include names GL_GOOGLE_include_directive: the GNOME SDK has no
# glslc, only glslangValidator, which refuses #include without it (glslc
# enables it by itself, so the host's build cannot tell). Prints TAP.
#
# Usage: test-flatpak-manifest.py SOURCE_ROOT [FLATPAK_DIR]
# FLATPAK_DIR (default SOURCE_ROOT/flatpak) lets the check run on other
# manifests, such as an older tree's, to see it fail.
import json
import os
import re
import shutil
import subprocess
import sys

root = sys.argv[1]
flatpak_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, 'flatpak')
allowed = {'--share=network', '--share=ipc', '--socket=wayland',
           '--socket=fallback-x11', '--device=dri'}
hex40 = re.compile(r'^[0-9a-f]{40}$')
hex64 = re.compile(r'^[0-9a-f]{64}$')
results = []


def check(label, passed, detail=''):
    results.append((label, passed, detail))


def data_app_id():
    """The app id meson.build gives data/ (app_id_base), or None."""
    try:
        with open(os.path.join(root, 'meson.build'), encoding='utf-8') as f:
            found = re.search(r"^app_id_base\s*=\s*'([^']+)'", f.read(), re.M)
    except OSError:
        return None
    return found.group(1) if found else None


def unpinned(module):
    """Sources of MODULE that name no fixed revision, as text; empty if none."""
    bad = []
    for s in module.get('sources', []):
        if isinstance(s, str):
            bad.append('%s: an external source file (%s) cannot be checked' % (module.get('name'), s))
            continue
        kind = s.get('type')
        if kind in ('git', 'bzr', 'svn'):
            if not hex40.match(s.get('commit', '')):
                bad.append('%s: %s source %s has no commit (tag or branch only: %r)'
                           % (module.get('name'), kind, s.get('url'),
                              s.get('tag') or s.get('branch')))
        elif kind in ('archive', 'file'):
            if 'url' in s and not hex64.match(s.get('sha256', '')):
                bad.append('%s: %s %s has no sha256' % (module.get('name'), kind, s['url']))
        elif kind == 'dir':
            if module.get('name') != 'daisychain' or s.get('path') != '..':
                bad.append('%s: a dir source (%s) is only for this tree'
                           % (module.get('name'), s.get('path')))
        elif kind not in ('patch', 'shell', 'script', 'inline'):
            bad.append('%s: unknown source type %r' % (module.get('name'), kind))
        elif 'url' in s:
            bad.append('%s: a %s source from %s' % (module.get('name'), kind, s['url']))
    for inner in module.get('modules', []):
        if isinstance(inner, dict):
            bad.extend(unpinned(inner))
    return bad


base = data_app_id()
check('meson.build names the app id', base is not None, 'no app_id_base in meson.build')
base = base or 'io.github.daisychain.DaisyChain'
check('data/ files carry the app id',
      all(os.path.exists(os.path.join(root, 'data', base + ext))
          for ext in ('.desktop.in.in', '.metainfo.xml.in.in', '.gschema.xml.in')),
      'data/%s.{desktop.in.in,metainfo.xml.in.in,gschema.xml.in}' % base)

for name, app_id, devel in ((base + '.json', base, False),
                            (base + '.Devel.json', base + '.Devel', True)):
    path = os.path.join(flatpak_dir, name)
    try:
        with open(path, encoding='utf-8') as f:
            m = json.load(f)
        if not isinstance(m, dict):
            raise ValueError('not a JSON object')
    except (OSError, ValueError) as e:
        check(name + ' parses', False, str(e))
        continue
    check(name + ' parses', True)
    check(name + ' app id', m.get('id') == app_id, 'id %r, expected %r' % (m.get('id'), app_id))
    check(name + ' command', m.get('command') == 'daisychain', repr(m.get('command')))
    version = str(m.get('runtime-version', ''))
    check(name + ' runtime', m.get('runtime') == 'org.gnome.Platform'
          and m.get('sdk') == 'org.gnome.Sdk' and re.match(r'^[0-9]+$', version) is not None,
          'runtime %r, sdk %r, version %r (a numbered GNOME release)'
          % (m.get('runtime'), m.get('sdk'), version))
    args = m.get('finish-args', [])
    check(name + ' finish-args', set(args) == allowed and len(args) == len(allowed),
          'extra: %s; missing: %s' % (', '.join(sorted(set(args) - allowed)) or 'none',
                                      ', '.join(sorted(allowed - set(args))) or 'none'))
    modules = [mod for mod in m.get('modules', []) if isinstance(mod, dict)]
    bad = [text for mod in modules for text in unpinned(mod)]
    check(name + ' every source pinned', not bad and len(modules) == len(m.get('modules', [])),
          '\n'.join(bad) or 'a module is an external file')
    last = modules[-1] if modules else {}
    dirs = [s for s in last.get('sources', []) if s.get('type') == 'dir' and s.get('path') == '..']
    opts = last.get('config-opts', [])
    ok = last.get('name') == 'daisychain' and last.get('buildsystem') == 'meson' and len(dirs) == 1
    ok = ok and (('-Ddevelopment=true' in opts) == devel)
    check(name + ' builds this tree with meson', ok, repr(last))
    builder = shutil.which('flatpak-builder')
    if builder:
        p = subprocess.run([builder, '--show-manifest', path], capture_output=True,
                           text=True, timeout=60)
        bad = p.returncode != 0 or 'WARNING' in p.stderr
        check(name + ' flatpak-builder --show-manifest', not bad, p.stderr.strip())
    else:
        check(name + ' flatpak-builder --show-manifest', None, 'flatpak-builder is not installed')

# Shaders built by meson: those of shaders/ (the includes themselves are
# included, never compiled alone).
shader_dir = os.path.join(root, 'shaders')
missing = []
for name in sorted(os.listdir(shader_dir)):
    if not name.endswith('.comp'):
        continue
    with open(os.path.join(shader_dir, name), encoding='utf-8') as f:
        text = f.read()
    if re.search(r'^\s*#\s*include\b', text, re.M) and \
            not re.search(r'^\s*#\s*extension\s+GL_GOOGLE_include_directive\b', text, re.M):
        missing.append('shaders/%s: #include without '
                       '“#extension GL_GOOGLE_include_directive : require”' % name)
check('shaders that include name GL_GOOGLE_include_directive (glslangValidator)',
      not missing, '\n'.join(missing))

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
