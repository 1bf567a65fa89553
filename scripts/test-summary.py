#!/usr/bin/env python3
# Prints "meson: N passed, N failed, N skipped" from meson's testlog.json
# (one JSON object per test), the plain line CI reads.
import json
import sys

passed = failed = skipped = 0
try:
    with open(sys.argv[1], encoding='utf-8') as f:
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
    print('test-summary: no test log (%s)' % e.strerror)
    failed += 1

print('meson: %d passed, %d failed, %d skipped' % (passed, failed, skipped))
sys.exit(1 if failed else 0)
