#!/bin/sh
# test-engine-nolibm.sh: engine and model code never calls libm for results.
#
# docs/VERIFICATION.md forbids libm transcendentals in anything that enters a
# model: their last bits differ between libm versions and platforms. This
# lists the undefined symbols of every engine_ and model_ object in the core
# library and fails on any of them. A canary object that does call expf must
# be caught first, so the check itself is known to work.
#
# Usage: test-engine-nolibm.sh NM CORE_LIBRARY CANARY_LIBRARY
#
# SPDX-License-Identifier: GPL-3.0-or-later

nm_tool=$1
core_lib=$2
canary_lib=$3

forbidden='exp|expf|expl|exp2|exp2f|expm1|expm1f|exp10|exp10f|log|logf|logl|log2|log2f|log10|log10f|log1p|log1pf|pow|powf|tanh|tanhf|sinh|sinhf|cosh|coshf|sin|sinf|cos|cosf|sincos|sincosf|tan|tanf|erf|erff|erfc|erfcf|atan|atanf|atan2|atan2f|asin|asinf|acos|acosf|cbrt|cbrtf|hypot|hypotf|lgamma|lgammaf|tgamma|tgammaf'

# Prints "member: symbol" for each forbidden undefined symbol of the members
# of $1 whose base name matches the extended regex $2.
offenders () {
  "$nm_tool" -A -u "$1" 2>/dev/null | awk -v members="$2" -v pat="^(__)?($forbidden)(_finite)?(@.*)?$" '
    {
      split ($1, parts, ":")
      member = parts[length (parts) - 1]
      n = split (member, path, "/")
      base = path[n]
      if (base ~ members && $NF ~ pat)
        print base ": " $NF
    }'
}

echo "1..2"

found=$(offenders "$canary_lib" '.')
if [ -n "$found" ]; then
  echo "ok 1 - the check catches a libm call in a canary object ($found)"
else
  echo "not ok 1 - the check missed the canary's expf call"
  "$nm_tool" -A -u "$canary_lib" | sed 's/^/# /'
fi

found=$(offenders "$core_lib" '^(engine|model)_')
members=$("$nm_tool" -A -u "$core_lib" 2>/dev/null | grep -c 'engine_\|model_')
if [ "$members" -eq 0 ]; then
  echo "not ok 2 - no engine_ or model_ objects found in $core_lib"
elif [ -z "$found" ]; then
  echo "ok 2 - engine and model objects call no libm transcendental"
else
  echo "not ok 2 - libm called from engine or model code:"
  echo "$found" | sed 's/^/# /'
fi
