#!/usr/bin/env node
/* kit-math-check.js: the kit engine's numeric functions against the C
 * library's results, bit for bit.
 *
 *   node tests/kit/kit-math-check.js CASES.json
 *
 * CASES.json is written by tests/test-kit-node.c from src/engine's
 * dc_math_softmax, dc_math_layer_norm, dc_quant_pack, dc_gemm_epilogue and
 * src/model's dc_rng_uniform; floats travel as their uint32 bit patterns.
 * Prints {"checked": N, "mismatches": M, "first": "..."} and exits with
 * status 1 when M > 0.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
'use strict';

const fs = require ('fs');
const path = require ('path');
const DcKit = require (path.join (__dirname, '..', '..', 'src', 'kit', 'dc-kit-engine.js'));
const M = DcKit._internal;

const cases = JSON.parse (fs.readFileSync (process.argv[2], 'utf8'));
const u32 = new Uint32Array (1), f32 = new Float32Array (u32.buffer);
const fromBits = (b) => { u32[0] = b; return f32[0]; };
const toBits = (x) => { f32[0] = x; return u32[0]; };
const floats = (bits) => Float32Array.from (bits, fromBits);
let checked = 0, mismatches = 0, first = null;

function expect (what, i, got, want) {
  checked++;
  if (got !== want) {
    mismatches++;
    if (first === null)
      first = what + ' case ' + i + ': got ' + got + ', want ' + want;
  }
}

cases.softmax.forEach ((c, i) => {
  const x = floats (c.x);
  M.softmax (x, 0, x.length);
  x.forEach ((v, j) => expect ('softmax', i, toBits (v), c.y[j]));
});
cases.layer_norm.forEach ((c, i) => {
  const x = floats (c.x), y = new Float32Array (x.length), scratch = new Float32Array (x.length);
  M.layerNorm (x, 0, floats (c.w), floats (c.b), y, 0, x.length, scratch);
  y.forEach ((v, j) => expect ('layer_norm', i, toBits (v), c.y[j]));
});
cases.quantize.forEach ((c, i) => {
  const x = floats (c.x), q = new Int32Array (x.length);
  expect ('quantize exponent', i, M.quantize ('test', x, 0, 1, x.length, q, 0), c.e);
  q.forEach ((v, j) => expect ('quantize', i, v, c.q[j]));
});
cases.epilogue.forEach ((c, i) => {
  expect ('epilogue', i, toBits (M.epilogue (c[0], c[1] + c[2])), c[3]);
});
cases.rng.forEach ((c, i) => {
  const seed = BigInt.asUintN (64, BigInt (c[0]));
  expect ('rng', i, toBits (M.rngUniform (seed, c[1], c[2])), c[3]);
});

process.stdout.write (JSON.stringify ({ checked, mismatches, first }) + '\n');
process.exit (mismatches > 0 ? 1 : 0);
