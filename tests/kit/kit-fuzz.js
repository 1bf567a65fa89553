#!/usr/bin/env node
/* kit-fuzz.js: hostile blobs against the kit engine's loader, with a fixed
 * seed (so a failure repeats).
 *
 *   node tests/kit/kit-fuzz.js GOOD.blob ITERATIONS SEED
 *
 * Each iteration makes a blob from a good one: bytes of the header flipped,
 * the header's JSON with a field replaced (huge, negative, fractional,
 * wrong-typed, deeply nested, missing), or the blob cut or extended; the
 * SHA-256 and the lengths are made consistent again where the mutation is
 * meant to reach the header checks. Loading must either succeed (and then
 * generate four tokens, or refuse with not-finite where forged but finite
 * weights overflow) or throw an Error whose code is bad-kit, hash-mismatch
 * or rule-mismatch: never another exception (a TypeError or
 * RangeError would mean an unchecked size or type). Prints {"iterations",
 * "loaded", "refused": {code: count}} and exits with status 1 on the first
 * other exception, printing it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
'use strict';

const fs = require ('fs');
const path = require ('path');
const DcKit = require (path.join (__dirname, '..', '..', 'src', 'kit', 'dc-kit-engine.js'));

const good = new Uint8Array (fs.readFileSync (process.argv[2]));
const iterations = Number (process.argv[3] || 1000);
let state = BigInt (process.argv[4] || 1);

/* SplitMix64, as everywhere in the project. */
function next () {
  state = (state + 0x9e3779b97f4a7c15n) & ((1n << 64n) - 1n);
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & ((1n << 64n) - 1n);
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & ((1n << 64n) - 1n);
  return Number ((z ^ (z >> 31n)) >> 11n) / 2 ** 53;
}
const pick = (n) => Math.floor (next () * n);

const u32 = (b, o) => (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
const H = u32 (good, 40), D = u32 (good, 44);
const headerText = Buffer.from (good.subarray (48, 48 + H)).toString ('utf8');
const data = good.subarray (48 + H);

/* A blob of header text and data with consistent lengths and digest. */
function build (text, tensorData) {
  const json = Buffer.from (text, 'utf8');
  const h = json.length + ((8 - (48 + json.length) % 8) % 8);
  const out = new Uint8Array (48 + h + tensorData.length);
  out.set (good.subarray (0, 8));
  out.fill (0x20, 48, 48 + h);
  out.set (json, 48);
  out.set (tensorData, 48 + h);
  new DataView (out.buffer).setUint32 (40, h, true);
  new DataView (out.buffer).setUint32 (44, tensorData.length, true);
  out.set (DcKit.sha256 (out.subarray (40)), 8);
  return out;
}

const hostileValues = [
  () => 2 ** 31, () => 2 ** 53, () => 1e300, () => -1, () => -(2 ** 40), () => 0.5, () => NaN,
  () => '12', () => null, () => true, () => [], () => ({}), () => [[[[[[[[[[1]]]]]]]]]],
  () => 'x'.repeat (1000), () => 0,
];

function mutateJson (root) {
  /* Walk to a random member or element and replace or delete it. */
  let node = root;
  for (let depth = 0; depth < 4; depth++) {
    const keys = Array.isArray (node) ? node.map ((_, i) => i) : Object.keys (node);
    if (keys.length === 0)
      break;
    const key = keys[pick (keys.length)];
    const child = node[key];
    if (child !== null && typeof child === 'object' && next () < 0.7) {
      node = child;
      continue;
    }
    if (next () < 0.15 && !Array.isArray (node))
      delete node[key];
    else
      node[key] = hostileValues[pick (hostileValues.length)] ();
    return;
  }
}

function mutate () {
  const kind = pick (4);
  if (kind === 0) {
    /* Flip bytes of the header text, then make it consistent. */
    const bytes = Buffer.from (headerText, 'utf8');
    for (let i = 0, n = 1 + pick (4); i < n; i++)
      bytes[pick (bytes.length)] ^= 1 << pick (8);
    return build (bytes.toString ('latin1'), data);
  }
  if (kind === 1) {
    const root = JSON.parse (headerText);
    for (let i = 0, n = 1 + pick (3); i < n; i++)
      mutateJson (root);
    return build (JSON.stringify (root), data);
  }
  if (kind === 2) {
    /* Deep nesting where a value should be. */
    const depth = 1 + pick (100000);
    return build (headerText.replace ('"vocab":256', '"vocab":' + '['.repeat (depth)
                                      + ']'.repeat (depth)), data);
  }
  /* Cut or extended, digest left alone or made consistent. */
  const len = pick (good.length + 64);
  const out = new Uint8Array (len);
  out.set (good.subarray (0, Math.min (len, good.length)));
  if (next () < 0.5 && len >= 48)
    out.set (DcKit.sha256 (out.subarray (40)), 8);
  return out;
}

const refused = {};
let loaded = 0;
for (let it = 0; it < iterations; it++) {
  const blob = mutate ();
  try {
    const model = DcKit.loadModel (blob);
    model.generate (new Uint8Array ([104, 105]), { tokens: 4, temperature: 0.9, seed: 3 });
    loaded++;
  } catch (e) {
    /* not-finite: finite but huge forged weights can overflow in the
     * forward pass, which refuses to quantize the result, as C does. */
    if (!['bad-kit', 'hash-mismatch', 'rule-mismatch', 'not-finite'].includes (e.code)) {
      process.stderr.write ('iteration ' + it + ': ' + (e.stack || e) + '\n');
      process.exit (1);
    }
    refused[e.code] = (refused[e.code] || 0) + 1;
  }
}
process.stdout.write (JSON.stringify ({ iterations, loaded, refused }) + '\n');
