#!/usr/bin/env python3
# Prints "meson: N passed, N failed, N skipped" from one or more of meson's
# testlog.json files (one JSON object per test), the plain line CI reads:
# scripts/test.sh passes build/'s and build-fuzz/'s. A missing log counts as
# one failure (its build or its run never happened).
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        with open(path, encoding='utf-8') as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                result = json.loads(line).get('result', 'ERROR')
                if result in ('OK', 'EXPECTEDFAIL'):
                    passed += 1
                elif result == 'SKIP':
                    skipped += 1
                else:
                    failed += 1
    except OSError as e:
        print('test-summary: no test log %s (%s)' % (path, e.strerror))
        failed += 1

if len(sys.argv) < 2:
    print('test-summary: no test log given')
    failed += 1

print('meson: %d passed, %d failed, %d skipped' % (passed, failed, skipped))
sys.exit(1 if failed else 0)
