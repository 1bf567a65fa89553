/* nolibm-canary.c: an object that calls libm's expf on purpose, so that
 * test-engine-nolibm.sh can show its check catches such a call.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <math.h>

float dc_nolibm_canary (float x);

float
dc_nolibm_canary (float x)
{
  return expf (x);
}
