/* dc-kit-engine.js: the inference kit's numeric engine, the JavaScript twin
 * of dc_generate () (src/model/dc-generate.c) over the kit blob
 * (src/model/dc-kit-blob.h).
 *
 * One plain script, no modules and no dependencies: a classic script in the
 * page and in its Worker, and a CommonJS module under Node (plain ES2020, so
 * Debian 12's Node 18 runs it). It defines globalThis.DcKit.
 *
 * The numeric rule is the engine's (docs/VERIFICATION.md, the rule id in
 * RULE_ID), followed operation by operation so that the token ids equal the
 * application's, greedy and sampled:
 *
 *  - f32 arithmetic: JavaScript computes in double; every f32 operation of
 *    the C code is one double operation followed by Math.fround (written f()
 *    below). For +, −, ×, ÷ and √ of two f32 values the double result
 *    rounded once more to f32 is the correctly rounded f32 result (double has
 *    more than 2·24 + 2 bits), so f(a + b) is exactly C's a + b in binary32.
 *    The C code is compiled with -ffp-contract=off, so there is no fused
 *    multiply-add to imitate. Each f() below stands where C rounds.
 *  - quantization: dc_quant_pack_reference (src/engine/dc-gemm.c): per vector
 *    e = floor(log2(max |x|)) − 6, q = clamp(rne(x · 2^−e), −127, 127).
 *    x · 2^−e is exact in double, and |x · 2^−e| < 128, so the 1.5·2^52
 *    trick rounds to nearest-even exactly as the C code does.
 *  - products: int8 × int8 summed in plain numbers. |q| ≤ 127 and K ≤ 512
 *    (4 × the largest width) keep every partial sum below 127²·512 < 2^23,
 *    far inside both int32 (so `| 0` never wraps) and the 2^53 of exact
 *    doubles: the sum is exact in any order, as in C.
 *  - epilogue: dc_gemm_epilogue: f32(acc) (one rounding) × 2^(ea + eb),
 *    exact in double; below the normal range a signed zero, above it a signed
 *    FLT_MAX.
 *  - exp, softmax, layer norm, sums: the algorithms of src/engine/dc-math*.c
 *    (Cody–Waite reduction and a degree-8 Taylor polynomial, never Math.exp;
 *    the fixed pairwise summation tree), in the same order.
 *  - sampling: dc_rng_uniform (seed, 3, position) from SplitMix64
 *    (src/model/dc-rng.c) in BigInt, 64-bit wrap-around by BigInt.asUintN;
 *    the draw is k · 2^−24 for the top 24 bits k, exact in f32.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
(function (root) {
  'use strict';

  /* docs/VERIFICATION.md: the first 16 hex digits of SHA-256 of the rule
   * string DC_GEMM_RULE_VERSION (src/engine/dc-gemm.h); the blob's rule must
   * be this one. */
  const RULE_ID = '9990314f3f6d5a56';
  const MAGIC = 'DCK1';
  const VERSION = 1;
  const PREFIX = 48;                       /* magic, version, digest, H, D */
  const HEADER_MAX = 256 * 1024;           /* DC_KIT_BLOB_HEADER_MAX */
  const HEADER_DEPTH = 8;                  /* DC_KIT_BLOB_HEADER_DEPTH */
  const DATA_MAX = 16 * 1024 * 1024;       /* DC_KIT_BLOB_DATA_MAX */
  const MAX_TOKENS = 4096;                 /* DC_GENERATE_MAX_TOKENS */
  const VOCAB = 256;

  const f = Math.fround;

  /* ---------------------------------------------------------------- errors */

  function kitError (code, message) {
    const e = new Error (message);
    e.code = code;
    return e;
  }

  function bad (message) {
    return kitError ('bad-kit', 'the kit is damaged: ' + message);
  }

  /* --------------------------------------------------------------- SHA-256 */

  const K256 = new Int32Array ([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
  ]);

  /* SHA-256 (FIPS 180-4) of bytes, synchronous (the page's Worker and Node
   * need no SubtleCrypto). Returns the 32-byte digest. */
  function sha256 (bytes) {
    const n = bytes.length;
    const blocks = Math.floor ((n + 9 + 63) / 64);
    const w = new Int32Array (64);
    const h = new Int32Array ([
      0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    ]);
    const tail = new Uint8Array (128);
    const tailStart = (blocks - (n % 64 + 9 > 64 ? 2 : 1)) * 64;

    /* The last one or two blocks: the message's end, 0x80, zeros, the bit length. */
    tail.set (bytes.subarray (tailStart));
    tail[n - tailStart] = 0x80;
    {
      const bits = n * 8;
      const end = (blocks * 64) - tailStart;
      const hi = Math.floor (bits / 0x100000000);
      for (let i = 0; i < 4; i++) {
        tail[end - 1 - i] = (bits >>> (8 * i)) & 0xff;
        tail[end - 5 - i] = (hi >>> (8 * i)) & 0xff;
      }
    }
    for (let b = 0; b < blocks; b++) {
      const src = b * 64 < tailStart ? bytes : tail;
      const o = b * 64 < tailStart ? b * 64 : b * 64 - tailStart;
      for (let i = 0; i < 16; i++)
        w[i] = (src[o + 4 * i] << 24) | (src[o + 4 * i + 1] << 16)
               | (src[o + 4 * i + 2] << 8) | src[o + 4 * i + 3];
      for (let i = 16; i < 64; i++) {
        const x = w[i - 15], y = w[i - 2];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], ff = h[5], g = h[6], hh = h[7];
      for (let i = 0; i < 64; i++) {
        const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const ch = (e & ff) ^ (~e & g);
        const t1 = (hh + S1 + ch + K256[i] + w[i]) | 0;
        const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const maj = (a & bb) ^ (a & c) ^ (bb & c);
        const t2 = (S0 + maj) | 0;
        hh = g; g = ff; ff = e; e = (d + t1) | 0;
        d = c; c = bb; bb = a; a = (t1 + t2) | 0;
      }
      h[0] += a; h[1] += bb; h[2] += c; h[3] += d;
      h[4] += e; h[5] += ff; h[6] += g; h[7] += hh;
    }
    const out = new Uint8Array (32);
    for (let i = 0; i < 8; i++) {
      out[4 * i] = h[i] >>> 24;
      out[4 * i + 1] = (h[i] >>> 16) & 0xff;
      out[4 * i + 2] = (h[i] >>> 8) & 0xff;
      out[4 * i + 3] = h[i] & 0xff;
    }
    return out;
  }

  function hex (bytes) {
    let s = '';
    for (let i = 0; i < bytes.length; i++)
      s += (bytes[i] < 16 ? '0' : '') + bytes[i].toString (16);
    return s;
  }

  function sha256Hex (bytes) {
    return hex (sha256 (bytes));
  }

  /* ------------------------------------------- f32 bits and powers of two */

  const bitsF = new Float32Array (1);
  const bitsU = new Uint32Array (bitsF.buffer);

  function floatBits (x) {
    bitsF[0] = x;
    return bitsU[0];
  }

  /* 2^k as an exact double for −1100 ≤ k ≤ 1100 (0 and Infinity beyond the
   * double range, which the epilogue then flushes or saturates, as C does). */
  const POW2_BIAS = 1100;
  const POW2 = new Float64Array (2 * POW2_BIAS + 1);
  POW2[POW2_BIAS] = 1;
  for (let k = 1; k <= POW2_BIAS; k++) {
    POW2[POW2_BIAS + k] = POW2[POW2_BIAS + k - 1] * 2;
    POW2[POW2_BIAS - k] = POW2[POW2_BIAS - k + 1] / 2;
  }

  function pow2 (k) {
    if (k > POW2_BIAS)
      return Infinity;
    if (k < -POW2_BIAS)
      return 0;
    return POW2[POW2_BIAS + k];
  }

  const FLT_MAX = f (3.4028234663852886e38);
  const FLT_MIN = pow2 (-126);
  const FLT_OVER = pow2 (128);

  /* ------------------------------------------------- quantization (INT8) */

  const RNE_MAGIC = 6755399441055744;      /* 1.5 · 2^52 */

  /* dc_quant_pack_reference of one vector x[o + i·stride], i < k, into
   * q[qo + i]; returns its exponent. Throws on NaN or infinity, which C
   * refuses too (the same words as its message). */
  function quantize (what, x, o, stride, k, q, qo) {
    /* The largest magnitude. C compares the bits without the sign, which
     * for finite floats orders them as their magnitudes do: the same value. */
    let amaxF = 0;
    for (let i = 0; i < k; i++) {
      const a = Math.abs (x[o + i * stride]);
      if (!(a <= FLT_MAX))
        throw kitError ('not-finite', what + ': ' + (a === Infinity ? 'infinity' : 'NaN')
                        + ' (refused, never quantized)');
      if (a > amaxF)
        amaxF = a;
    }
    if (amaxF === 0) {
      q.fill (0, qo, qo + k);
      return 0;
    }
    const amax = floatBits (amaxF);
    const biased = amax >>> 23;
    const log2 = biased !== 0 ? biased - 127 : (31 - Math.clz32 (amax)) - 149;
    const e = log2 - 6;
    const inv = pow2 (-e);
    for (let i = 0; i < k; i++) {
      /* Exact product, then round to nearest, ties to even. */
      let r = (x[o + i * stride] * inv + RNE_MAGIC) - RNE_MAGIC;
      if (r > 127)
        r = 127;
      else if (r < -127)
        r = -127;
      q[qo + i] = r;
    }
    return e;
  }

  /* dc_gemm_epilogue: acc exact, e = ea + eb. */
  function epilogue (acc, e) {
    if (acc === 0)
      return 0;
    const r = f (acc) * pow2 (e);          /* exact in double */
    const a = Math.abs (r);
    if (a < FLT_MIN)
      return r < 0 ? -0 : 0;
    if (a >= FLT_OVER)
      return r < 0 ? -FLT_MAX : FLT_MAX;
    return r;                              /* a normal f32, exactly */
  }

  /* y[i] = epilogue (acc, e): the loops store rather than take a returned
   * double, which V8 boxes when it does not inline the call. */
  function epilogueInto (y, i, acc, e) {
    y[i] = epilogue (acc, e);
  }

  /* dot of quantized vectors a[ao..ao+k) and b[bo..bo+k) (Int32Arrays of
   * values in [−127, 127]): exact (see the header), so the four partial sums
   * may be added in any order. */
  function dot8 (a, ao, b, bo, k) {
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    let i = 0;
    for (; i + 3 < k; i += 4) {
      s0 = (s0 + Math.imul (a[ao + i], b[bo + i])) | 0;
      s1 = (s1 + Math.imul (a[ao + i + 1], b[bo + i + 1])) | 0;
      s2 = (s2 + Math.imul (a[ao + i + 2], b[bo + i + 2])) | 0;
      s3 = (s3 + Math.imul (a[ao + i + 3], b[bo + i + 3])) | 0;
    }
    for (; i < k; i++)
      s0 = (s0 + Math.imul (a[ao + i], b[bo + i])) | 0;
    return (s0 + s1 + s2 + s3) | 0;
  }

  /* ------------------------------------- the products in WebAssembly SIMD */

  /*
   * The int8 products are where the time goes (12·C² multiply-adds per row
   * and layer). WebAssembly's i32x4.dot_i16x8_s multiplies eight pairs of
   * int16 and adds them pairwise into four int32 lanes: with values in
   * [−127, 127] every product and every partial sum is exact (the same
   * bound as above), so this computes the same integers as dot8 (). The
   * module is one function, assembled below from named opcodes (not an
   * opaque blob), equivalent to this text form:
   *
   *   (func (export "gemm") (param $a $b $out $m $n $k i32)
   *     ;; out[r·n + j] = Σ_i a[r·k + i] · b[j·k + i], int16 operands, k a
   *     ;; multiple of 8 and n of 4 (zero-padded), rows 16-byte aligned
   *     (loop $r (loop $j  ;; j += 4: one load of a's 8 values serves 4 columns
   *        acc0…acc3 = 0 (i32x4)
   *        (loop $i  va = v128.load a+…
   *                  acc_c = i32x4.add (acc_c, i32x4.dot_i16x8_s (va, v128.load b_c+…)))
   *        (i32.store out+… (lane0 + lane1 + lane2 + lane3 of acc_c)) for c = 0…3))
   *
   * It runs where WebAssembly SIMD exists (current Chromium, Firefox,
   * Safari, Node ≥ 16.4); elsewhere the JavaScript loops do the same sums.
   */
  function leb (v) {
    const out = [];
    do {
      let byte = v & 0x7f;
      v >>>= 7;
      if (v !== 0)
        byte |= 0x80;
      out.push (byte);
    } while (v !== 0);
    return out;
  }

  function sleb (v) {
    const out = [];
    for (;;) {
      const byte = v & 0x7f;
      v >>= 7;
      if ((v === 0 && (byte & 0x40) === 0) || (v === -1 && (byte & 0x40) !== 0)) {
        out.push (byte);
        return out;
      }
      out.push (byte | 0x80);
    }
  }

  function section (id, content) {
    return [id, ...leb (content.length), ...content];
  }

  function gemmModuleBytes (pages) {
    const I32 = 0x7f, V128 = 0x7b, VOID = 0x40;
    /* Parameters 0–5, then the locals. */
    const A = 0, B = 1, OUT = 2, M = 3, N = 4, K = 5;
    const R = 6, J = 7, I = 8, PA = 9, PB0 = 10, PB1 = 11, PB2 = 12, PB3 = 13, RB = 14, PO = 15;
    const VA = 16, ACC = [17, 18, 19, 20];
    const PB = [PB0, PB1, PB2, PB3];
    const get = (x) => [0x20, x], set = (x) => [0x21, x], i32 = (v) => [0x41, ...sleb (v)];
    const simd = (op) => [0xfd, ...leb (op)];
    const add = 0x6a, mul = 0x6c, shl = 0x74, geU = 0x4f, brIf = 0x0d, br = 0x0c, end = 0x0b;
    const block = [0x02, VOID], loop = [0x03, VOID];
    const v128Load = simd (0x00), v128Const = simd (0x0c), lane = simd (0x1b);
    const i32x4Add = simd (0xae), dot = simd (0xba);
    const i32Store = (offset) => [0x36, 2, ...leb (offset)];
    /* acc += dot (va, b[pb + i]) for one of the four columns. */
    const accumulate = (c) => [
      ...get (ACC[c]),
      ...get (VA), ...get (PB[c]), ...get (I), add, ...v128Load, 4, 0,
      ...dot, ...i32x4Add, ...set (ACC[c]),
    ];
    /* out[po + 4c] = the sum of acc's four lanes. */
    const store = (c) => [
      ...get (PO),
      ...get (ACC[c]), ...lane, 0,
      ...get (ACC[c]), ...lane, 1, add,
      ...get (ACC[c]), ...lane, 2, add,
      ...get (ACC[c]), ...lane, 3, add,
      ...i32Store (4 * c),
    ];
    const body = [
      2, 10, I32, 5, V128,                                     /* locals */
      ...get (K), ...i32 (1), shl, ...set (RB),                /* row bytes = 2k */
      ...i32 (0), ...set (R),
      ...block, ...loop,
        ...get (R), ...get (M), geU, brIf, 1,
        ...get (A), ...get (R), ...get (RB), mul, add, ...set (PA),
        ...i32 (0), ...set (J),
        ...block, ...loop,                                     /* four columns at a time */
          ...get (J), ...get (N), geU, brIf, 1,
          ...get (B), ...get (J), ...get (RB), mul, add, ...set (PB0),
          ...get (PB0), ...get (RB), add, ...set (PB1),
          ...get (PB1), ...get (RB), add, ...set (PB2),
          ...get (PB2), ...get (RB), add, ...set (PB3),
          ...[0, 1, 2, 3].flatMap ((c) => [...v128Const, ...new Array (16).fill (0),
                                           ...set (ACC[c])]),
          ...i32 (0), ...set (I),
          ...block, ...loop,
            ...get (I), ...get (RB), geU, brIf, 1,
            ...get (PA), ...get (I), add, ...v128Load, 4, 0, ...set (VA),
            ...accumulate (0), ...accumulate (1), ...accumulate (2), ...accumulate (3),
            ...get (I), ...i32 (16), add, ...set (I),
            br, 0,
          end, end,
          ...get (OUT), ...get (R), ...get (N), mul, ...get (J), add, ...i32 (2), shl, add,
          ...set (PO),
          ...store (0), ...store (1), ...store (2), ...store (3),
          ...get (J), ...i32 (4), add, ...set (J),
          br, 0,
        end, end,
        ...get (R), ...i32 (1), add, ...set (R),
        br, 0,
      end, end,
      end,
    ];
    const name = (s) => [s.length, ...Array.from (s, (ch) => ch.charCodeAt (0))];
    return new Uint8Array ([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
      ...section (1, [1, 0x60, 6, I32, I32, I32, I32, I32, I32, 0]),
      ...section (3, [1, 0]),
      ...section (5, [1, 1, ...leb (pages), ...leb (pages)]),
      ...section (7, [2, ...name ('gemm'), 0, 0, ...name ('mem'), 2, 0]),
      ...section (10, [1, ...leb (body.length), ...body]),
    ]);
  }

  /* The instance, or null where WebAssembly or its SIMD is missing, or
   * where the page's Content-Security-Policy forbids compiling it (it needs
   * 'wasm-unsafe-eval' in script-src). The module is a few hundred bytes,
   * well under the 4 KiB that browsers compile synchronously on a page's
   * main thread. */
  function gemmInstance (bytes) {
    if (typeof WebAssembly !== 'object')
      return null;
    const pages = Math.ceil (bytes / 65536);
    const code = gemmModuleBytes (pages);
    try {
      if (!WebAssembly.validate (code))
        return null;
      return new WebAssembly.Instance (new WebAssembly.Module (code), {});
    } catch (e) {
      return null;
    }
  }

  /* ------------------------------------------------------------ dc-math */

  /* Constants of src/engine/dc-math-private.h, as exact binary values. */
  const LN2_HI = 0x162e4 * 2 ** -17;       /* 0x1.62e4p-1f */
  const LN2_LO = 0x17f7d1c * 2 ** -44;     /* 0x1.7f7d1cp-20f */
  const LOG2E = 0x1715476 * 2 ** -24;      /* 0x1.715476p+0f */
  const ROUND_MAGIC = 12582912;           /* 0x1.8p+23f: adding and subtracting it rounds */
  const INV_FACT2 = 0.5;
  const INV_FACT3 = 0x1555556 * 2 ** -27;  /* 0x1.555556p-3f */
  const INV_FACT4 = 0x1555556 * 2 ** -29;  /* 0x1.555556p-5f */
  const INV_FACT5 = 0x1111112 * 2 ** -31;  /* 0x1.111112p-7f */
  const INV_FACT6 = 0x16c16c2 * 2 ** -34;  /* 0x1.6c16c2p-10f */
  const INV_FACT7 = 0x1a01a02 * 2 ** -37;  /* 0x1.a01a02p-13f */
  const INV_FACT8 = 0x1a01a02 * 2 ** -40;  /* 0x1.a01a02p-16f */
  const EXP_UNDERFLOW = -0x19fe36a * 2 ** -18;  /* -0x1.9fe36ap+6f */
  const LN_EPS = 0x14f8b58 * 2 ** -41;     /* DC_MATH_GPT2_LN_EPS, 1e-5 in f32 */

  /* pow2i (k): 2^k as an f32 for −126 ≤ k ≤ 127 (exact). */
  function scale2 (y, k) {
    if (k > 127)
      return f (f (y * pow2 (127)) * pow2 (k - 127));
    if (k < -126)
      return f (f (y * pow2 (k + 125)) * pow2 (-125));
    return f (y * pow2 (k));
  }

  /* y[i] = e^(x − c) for c ≥ x, c the row maximum: exp_shifted () of
   * dc-math-vector.c. x − c is formed as an exact double-float (two_sum),
   * reduced by Cody–Waite with k = round(d / ln 2), and e^r − 1 comes from
   * the degree-8 Taylor polynomial in Horner form; each line rounds where C
   * rounds. (It stores instead of returning: a double returned from a
   * function V8 does not inline is boxed, and softmax calls this for every
   * attention score.) */
  function expShiftedInto (y, i, x, c) {
    const nc = -c;
    const d = f (x + nc);
    const bb = f (d - x);
    const dLo = f (f (x - f (d - bb)) + f (nc - bb));
    if (d !== d) {
      y[i] = d;
      return;
    }
    if (d < EXP_UNDERFLOW) {
      y[i] = 0;
      return;
    }
    const t = f (f (f (d * LOG2E) + ROUND_MAGIC) - ROUND_MAGIC);
    const r = f (f (f (d - f (t * LN2_HI)) - f (t * LN2_LO)) + dLo);
    /* q = 1/2! + r(1/3! + r(1/4! + r(1/5! + r(1/6! + r(1/7! + r/8!))))), inside out. */
    let q = f (INV_FACT7 + f (r * INV_FACT8));
    q = f (INV_FACT6 + f (r * q));
    q = f (INV_FACT5 + f (r * q));
    q = f (INV_FACT4 + f (r * q));
    q = f (INV_FACT3 + f (r * q));
    q = f (INV_FACT2 + f (r * q));
    const p = f (r + f (f (r * r) * q));
    y[i] = scale2 (f (1 + p), t);
  }

  /* Block sums and segment sums of treeSum (), allocated once; longer
   * ranges than BLOCKS_MAX · 8 (none in the model) take the recursion. */
  const BLOCKS_MAX = 4096;
  const blocks = new Float32Array (BLOCKS_MAX);
  const segments = new Float32Array (64);

  function leafSum (x, o, n) {
    if (n === 0)
      return 0;
    let acc = x[o];
    for (let i = 1; i < n; i++)
      acc = f (acc + x[o + i]);
    return acc;
  }

  /* The balanced tree of a power of two h ≥ 8 (pairwise_pow2 ()): blocks of
   * 8 summed left to right, then neighbours added level by level, which is
   * each half's sum plus the other's, all the way up. */
  function balancedSum (x, o, h) {
    const nb = h / 8;
    if (nb > BLOCKS_MAX)
      return f (balancedSum (x, o, h / 2) + balancedSum (x, o + h / 2, h / 2));
    for (let b = 0; b < nb; b++)
      blocks[b] = leafSum (x, o + 8 * b, 8);
    for (let w = nb; w > 1; w /= 2)
      for (let b = 0; b < w / 2; b++)
        blocks[b] = f (blocks[2 * b] + blocks[2 * b + 1]);
    return blocks[0];
  }

  /* The library's one reduction order (pairwise () in dc-math-vector.c):
   * up to 8 values left to right from the first; a longer range splits at
   * h, the largest power of two below n (halves for a power of two), into
   * sum(0..h) + sum(h..n). Evaluated without recursion (see
   * expShiftedInto ()): the split points give segments s0, s1, … whose
   * sums fold from the right, s0 + (s1 + (… + s_last)). x holds the leaf
   * values already rounded to f32. */
  function treeSum (x, o, n) {
    let count = 0;
    for (;;) {
      if (n <= 8) {
        segments[count++] = leafSum (x, o, n);
        break;
      }
      if ((n & (n - 1)) === 0) {
        segments[count++] = balancedSum (x, o, n);
        break;
      }
      let h = 8;
      while (h * 2 < n)
        h *= 2;
      segments[count++] = balancedSum (x, o, h);
      o += h;
      n -= h;
    }
    let acc = segments[count - 1];
    for (let i = count - 2; i >= 0; i--)
      acc = f (segments[i] + acc);
    return acc;
  }

  /* dc_math_max: the first NaN, else the largest, the first of equals. */
  function maxOf (x, o, n) {
    let m = -Infinity;
    for (let i = 0; i < n; i++) {
      const v = x[o + i];
      if (v !== v)
        return v;
      if (i === 0 || v > m)
        m = v;
    }
    return m;
  }

  /* dc_math_softmax over x[o..o+n) in place (y = x). */
  function softmax (x, o, n) {
    const max = maxOf (x, o, n);
    for (let i = 0; i < n; i++)
      expShiftedInto (x, o + i, x[o + i], max);
    const sum = treeSum (x, o, n);
    for (let i = 0; i < n; i++)
      x[o + i] = f (x[o + i] / sum);
  }

  /* dc_math_layer_norm of x[xo..xo+n) into y[yo..): two passes, biased
   * variance, rstd = 1/√(var + eps); scratch holds the squared deviations. */
  function layerNorm (x, xo, w, b, y, yo, n, scratch) {
    const fn = n;
    let mean = f (treeSum (x, xo, n) / fn);
    for (let i = 0; i < n; i++) {
      const d = f (x[xo + i] - mean);
      scratch[i] = f (d * d);
    }
    let v = f (treeSum (scratch, 0, n) / fn);
    if (!(v <= FLT_MAX))
      mean = v = NaN;
    const rstd = f (1 / f (Math.sqrt (f (v + LN_EPS))));
    for (let i = 0; i < n; i++)
      y[yo + i] = f (f (f (f (x[xo + i] - mean) * rstd) * w[i]) + b[i]);
  }

  /* ----------------------------------------------------- SplitMix64 RNG */

  const M64 = (1n << 64n) - 1n;
  const GOLDEN = 0x9e3779b97f4a7c15n;

  function mix (z) {
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
    return z ^ (z >> 31n);
  }

  function rngU64 (seed, stream, counter) {
    return mix ((seed + mix ((stream * GOLDEN) & M64) + (((counter + 1n) * GOLDEN) & M64)) & M64);
  }

  /* dc_rng_uniform: k · 2^−24 for the top 24 bits k, exact in f32. */
  function rngUniform (seed, stream, counter) {
    return Number (rngU64 (seed, BigInt (stream), BigInt (counter)) >> 40n) * 2 ** -24;
  }

  const STREAM_SAMPLE = 3;                 /* DC_RNG_STREAM_SAMPLE */

  /* --------------------------------------------------------- blob parser */

  function readU32 (bytes, o) {
    return (bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24)) >>> 0;
  }

  /* Refuses JSON nested deeper than max before JSON.parse sees it (strings
   * are skipped, so brackets inside them do not count). */
  function checkDepth (text, max) {
    let depth = 0, inString = false;
    for (let i = 0; i < text.length; i++) {
      const ch = text.charCodeAt (i);
      if (inString) {
        if (ch === 0x5c)
          i++;
        else if (ch === 0x22)
          inString = false;
      } else if (ch === 0x22) {
        inString = true;
      } else if (ch === 0x5b || ch === 0x7b) {
        if (++depth > max)
          throw bad ('its header nests deeper than ' + max + ' levels');
      } else if (ch === 0x5d || ch === 0x7d) {
        depth--;
      }
    }
  }

  function isCount (v, min, max) {
    return typeof v === 'number' && Number.isInteger (v) && v >= min && v <= max;
  }

  /* The tensors a model of config c must have, in the writer's order. */
  function expectedTensors (c) {
    const C = c.width;
    const list = [
      ['transformer.wte.weight', 'f32', [VOCAB, C]],
      ['transformer.wpe.weight', 'f32', [c.seq, C]],
    ];
    for (let l = 0; l < c.layers; l++) {
      const p = 'transformer.h.' + l + '.';
      list.push (
        [p + 'ln_1.weight', 'f32', [C]], [p + 'ln_1.bias', 'f32', [C]],
        [p + 'attn.c_attn.weight', 'q8', [3 * C, C]], [p + 'attn.c_attn.bias', 'f32', [3 * C]],
        [p + 'attn.c_proj.weight', 'q8', [C, C]], [p + 'attn.c_proj.bias', 'f32', [C]],
        [p + 'ln_2.weight', 'f32', [C]], [p + 'ln_2.bias', 'f32', [C]],
        [p + 'mlp.c_fc.weight', 'q8', [4 * C, C]], [p + 'mlp.c_fc.bias', 'f32', [4 * C]],
        [p + 'mlp.c_proj.weight', 'q8', [C, 4 * C]], [p + 'mlp.c_proj.bias', 'f32', [C]]);
    }
    list.push (['transformer.ln_f.weight', 'f32', [C]], ['transformer.ln_f.bias', 'f32', [C]],
               ['lm_head.weight', 'q8', [VOCAB, C]]);
    return list;
  }

  function byteLength (kind, shape) {
    const n = shape.length === 2 ? shape[0] * shape[1] : shape[0];
    return kind === 'f32' ? 4 * n : n + 2 * shape[0];
  }

  /* Copies a tensor out of the blob; sizes were all checked against D. */
  function readTensor (data, view, t) {
    if (t.kind === 'f32') {
      const n = t.length / 4;
      const out = new Float32Array (n);
      for (let i = 0; i < n; i++) {
        out[i] = view.getFloat32 (t.offset + 4 * i, true);
        /* The writer refuses such models (dc_kit_blob_new ()). */
        if (!Number.isFinite (out[i]))
          throw bad (t.name + ' holds a value that is not a finite number');
      }
      return out;
    }
    const nv = t.shape[0], k = t.shape[1];
    /* Int32Array: the products' loads then need no sign extension, and
     * V8's int32 multiply (Math.imul) runs on them directly. */
    const q = new Int32Array (nv * k);
    const e = new Int32Array (nv);
    for (let i = 0; i < nv * k; i++) {
      const v = view.getInt8 (t.offset + i);
      if (v === -128)
        throw bad (t.name + ' holds the value -128 (quantized values are -127 to 127)');
      q[i] = v;
    }
    for (let v = 0; v < nv; v++) {
      e[v] = view.getInt16 (t.offset + nv * k + 2 * v, true);
      if (e[v] < -1024 || e[v] > 1024)
        throw bad (t.name + ' has a scale exponent outside [-1024, 1024]');
    }
    return { q, e, n: nv, k };
  }

  function loadModel (bytes, options) {
    /* A Uint8Array of any realm (a Worker's, a vm context's), or a buffer. */
    if (Object.prototype.toString.call (bytes) === '[object ArrayBuffer]')
      bytes = new Uint8Array (bytes);
    if (Object.prototype.toString.call (bytes) !== '[object Uint8Array]')
      throw bad ('expected the blob\'s bytes (a Uint8Array)');
    if (bytes.length < PREFIX)
      throw bad ('it is ' + bytes.length + ' bytes long, shorter than its ' + PREFIX
                 + '-byte prefix');
    if (String.fromCharCode (bytes[0], bytes[1], bytes[2], bytes[3]) !== MAGIC)
      throw bad ('it does not start with "' + MAGIC + '"');
    const version = readU32 (bytes, 4);
    if (version !== VERSION)
      throw bad ('format version ' + version + ', this engine reads version ' + VERSION);
    const H = readU32 (bytes, 40), D = readU32 (bytes, 44);
    if (H > HEADER_MAX || D > DATA_MAX || (PREFIX + H) % 8 !== 0)
      throw bad ('its header (' + H + ' bytes) or data (' + D + ' bytes) is larger than '
                 + 'this engine accepts (' + HEADER_MAX + ', ' + DATA_MAX + ') or misaligned');
    if (bytes.length !== PREFIX + H + D)
      throw bad ('it is ' + bytes.length + ' bytes long, its prefix says '
                 + (PREFIX + H + D) + ' (truncated or extended)');

    /* Every byte from 40 on is covered by the digest at 8. */
    const digest = sha256 (bytes.subarray (40));
    for (let i = 0; i < 32; i++)
      if (digest[i] !== bytes[8 + i])
        throw kitError ('hash-mismatch', 'the kit\'s data was altered: its SHA-256 is '
                        + hex (digest) + ', it should be ' + hex (bytes.subarray (8, 40)));

    let header;
    try {
      const text = new TextDecoder ('utf-8', { fatal: true })
        .decode (bytes.subarray (PREFIX, PREFIX + H));
      checkDepth (text, HEADER_DEPTH);
      header = JSON.parse (text);
    } catch (e) {
      if (e.code)
        throw e;
      throw bad ('its header is not JSON (' + e.message + ')');
    }
    if (header === null || typeof header !== 'object' || header.format !== 'daisychain-kit'
        || header.config === null || typeof header.config !== 'object'
        || header.info === null || typeof header.info !== 'object'
        || !Array.isArray (header.tensors))
      throw bad ('its header lacks format, config, info or tensors');
    const c = header.config, info = header.info;
    /* The ranges of dc_gpt_config_validate () (src/model/dc-gpt-config.h). */
    if (c.vocab !== VOCAB || !isCount (c.width, 16, 128) || !isCount (c.seq, 16, 128)
        || !isCount (c.layers, 1, 12) || !isCount (c.heads, 1, 128) || c.width % c.heads !== 0
        || c.activation !== 'relu')
      throw bad ('its model settings are outside the supported ranges (vocab 256, width and '
                 + 'sequence 16-128, 1-12 layers, heads dividing the width, relu)');
    if (typeof info.rule !== 'string' || typeof info.weight_hash !== 'string'
        || !isCount (info.step, 0, Number.MAX_SAFE_INTEGER)
        || !(info.loss === null || typeof info.loss === 'number'))
      throw bad ('its info lacks step, loss, weight_hash or rule');
    if (info.rule !== RULE_ID)
      throw kitError ('rule-mismatch', 'the kit was made by a program with numeric rule '
                      + info.rule + '; this page implements rule ' + RULE_ID);

    const expected = expectedTensors (c);
    if (header.tensors.length !== expected.length)
      throw bad ('its table lists ' + header.tensors.length + ' tensors, the model needs '
                 + expected.length);
    const view = new DataView (bytes.buffer, bytes.byteOffset + PREFIX + H, D);
    const t = {};
    for (let i = 0; i < expected.length; i++) {
      const [name, kind, shape] = expected[i];
      const e = header.tensors[i];
      if (e === null || typeof e !== 'object' || e.name !== name || e.kind !== kind
          || !Array.isArray (e.shape) || e.shape.length !== shape.length
          || e.shape.some ((v, j) => v !== shape[j])
          || e.length !== byteLength (kind, shape)
          || !isCount (e.offset, 0, D) || e.offset % 8 !== 0 || e.offset + e.length > D)
        throw bad ('tensor ' + i + ' should be ' + name + ' (' + kind + ', '
                   + shape.join (' × ') + ') inside the data');
      t[name] = readTensor (bytes, view, e);
    }
    return new Model (c, info, t, bytes.length, hex (digest),
                      !(options && options.wasm === false));
  }

  /* --------------------------------------------------------------- model */

  /*
   * The forward pass of dc_gpt_run_forward () at batch 1 in INT8 precision
   * (src/model/dc-gpt.c), over a window of len ≤ T tokens:
   *
   *   x⁰[t]  = wte[token t] + wpe[t]
   *   per layer l:  h = LN₁(x); qkv = h·W_attn + b; per head: P = softmax(q·kᵀ/√D)
   *                 (causal), y = P·v; m = x + y·W_proj + b;
   *                 xˡ⁺¹ = m + relu(LN₂(m)·W_fc + b)·W_fcproj + b
   *   logits = LN_f(x^L)[len − 1] · wteᵀ
   *
   * Every product quantizes its left rows and its right vectors as C does.
   * Rows are independent everywhere except in P·v, whose right vectors are
   * the columns of v over all len positions: a column's scale depends on
   * every row. So when a token is appended to the window, this engine keeps
   * the earlier rows of each layer (their values cannot change) as long as no
   * column of v changes its exponent; when one does, that layer and the ones
   * after it are recomputed for every row. Either way the bits are those of
   * the full pass, which dc_generate () runs for every token; when the window
   * slides (positions shift) everything is recomputed.
   */
  function Model (c, info, t, size, digest, useWasm) {
    const C = c.width, T = c.seq, L = c.layers, Hn = c.heads, D = C / Hn;

    this.info = {
      step: info.step, loss: info.loss, weightHash: info.weight_hash, rule: info.rule,
      vocab: c.vocab, width: C, layers: L, heads: Hn, seq: T, bytes: size, sha256: digest,
    };
    this.C = C; this.T = T; this.L = L; this.H = Hn; this.D = D;
    this.wte = t['transformer.wte.weight'];
    this.wpe = t['transformer.wpe.weight'];
    this.lnfW = t['transformer.ln_f.weight'];
    this.lnfB = t['transformer.ln_f.bias'];
    this.head = t['lm_head.weight'];
    this.layers = [];
    for (let l = 0; l < L; l++) {
      const p = 'transformer.h.' + l + '.';
      this.layers.push ({
        ln1W: t[p + 'ln_1.weight'], ln1B: t[p + 'ln_1.bias'],
        attnW: t[p + 'attn.c_attn.weight'], attnB: t[p + 'attn.c_attn.bias'],
        projW: t[p + 'attn.c_proj.weight'], projB: t[p + 'attn.c_proj.bias'],
        ln2W: t[p + 'ln_2.weight'], ln2B: t[p + 'ln_2.bias'],
        fcW: t[p + 'mlp.c_fc.weight'], fcB: t[p + 'mlp.c_fc.bias'],
        fcprojW: t[p + 'mlp.c_proj.weight'], fcprojB: t[p + 'mlp.c_proj.bias'],
        /* Activations of the window, kept between tokens. */
        x: new Float32Array (T * C),           /* the layer's input rows */
        qkv: new Float32Array (T * 3 * C),
        kq: new Int32Array (T * C),             /* k rows quantized per (row, head) */
        ke: new Int32Array (T * Hn),
        vq: new Int32Array (C * T),             /* v columns quantized over the window */
        ve: new Int32Array (C),
        veNext: new Int32Array (C),
      });
    }
    /* Scratch, allocated once: no allocation per token. */
    this.out = new Float32Array (T * C);        /* x^L */
    this.h = new Float32Array (T * 4 * C);      /* normed rows, then MLP hidden rows */
    this.atty = new Float32Array (T * C);
    this.mid = new Float32Array (T * C);
    this.y = new Float32Array (T * 4 * C);
    this.rowQ = new Int32Array (T * 4 * C);      /* left operands, quantized per row (JS path) */
    this.rowE = new Int32Array (T);
    this.scores = new Float32Array (T);
    this.attQ = new Int32Array (T);
    this.qQ = new Int32Array (D);
    this.vcol = new Float32Array (T);
    this.sq = new Float32Array (4 * C);
    this.logits = new Float32Array (VOCAB);
    this.window = new Uint8Array (T);
    this.windowLen = 0;                         /* rows the caches hold */
    this.accJs = new Int32Array (T * Math.max (4 * C, VOCAB));

    /* WebAssembly memory: every q8 matrix as int16 vectors zero-padded to a
     * multiple of 8 values (16 bytes, so every row stays aligned), then the
     * left operand's rows, then the int32 results. */
    this.gemm = null;
    this.info.engine = 'javascript';
    const mats = [this.head];
    for (const Ly of this.layers)
      mats.push (Ly.attnW, Ly.projW, Ly.fcW, Ly.fcprojW);
    for (const W of mats) {
      W.np = W.n;                               /* the results' row stride */
      W.scale = Float64Array.from (W.e, pow2);  /* 2^e per vector, exact */
    }
    if (useWasm) {
      const pad8 = (k) => (k + 7) & ~7, pad4 = (n) => (n + 3) & ~3;
      let bytes = 0;
      for (const W of mats) {
        W.kp = pad8 (W.k);
        W.ptr = bytes;
        bytes += pad4 (W.n) * W.kp * 2;
      }
      this.aPtr = bytes;
      bytes += T * pad8 (4 * C) * 2;
      this.outPtr = bytes;
      const outLength = T * pad4 (Math.max (4 * C, VOCAB));
      bytes += outLength * 4;
      const instance = gemmInstance (bytes);
      if (instance !== null) {
        const buffer = instance.exports.mem.buffer;
        this.m16 = new Int16Array (buffer);
        this.accWasm = new Int32Array (buffer, this.outPtr, outLength);
        for (const W of mats)
          W.np = pad4 (W.n);
        for (const W of mats)
          for (let v = 0; v < W.n; v++)
            this.m16.set (W.q.subarray (v * W.k, (v + 1) * W.k), (W.ptr >> 1) + v * W.kp);
        this.gemm = instance.exports.gemm;
        this.info.engine = 'webassembly-simd';
      }
    }
  }

  /*
   * The int32 products of rows r0 … len − 1 of x (len, k), each quantized
   * on its own (its exponent into rowE[r]), with the q8 operand W (n vectors
   * of k): acc[(r − r0)·W.np + j] = Σ_i q(x_r)_i · W_j,i, exact (W.np is n,
   * or n rounded up to 4 for the WebAssembly kernel). In
   * WebAssembly where it exists, else in the loops below; the same integers.
   */
  Model.prototype.gemmRows = function (what, x, r0, len, W) {
    const k = W.k, n = W.n, e = this.rowE;
    if (this.gemm !== null) {
      const kp = W.kp, m16 = this.m16, base = this.aPtr >> 1;
      for (let r = r0; r < len; r++) {
        const o = base + (r - r0) * kp;
        e[r] = quantize (what, x, r * k, 1, k, m16, o);
        if (kp > k)
          m16.fill (0, o + k, o + kp);             /* zero padding adds nothing */
      }
      this.gemm (this.aPtr, W.ptr, this.outPtr, len - r0, W.np, kp);
      return this.accWasm;
    }
    const q = this.rowQ, wq = W.q, acc = this.accJs;
    for (let r = r0; r < len; r++)
      e[r] = quantize (what, x, r * k, 1, k, q, (r - r0) * k);
    /* Four rows at a time against each weight vector, so that every weight
     * loaded serves four products (the full pass after the window slides
     * has up to T rows); the sums are exact, so the order is free. */
    const rows = len - r0;
    let r = 0;
    for (; r + 3 < rows; r += 4) {
      const a0 = r * k, a1 = a0 + k, a2 = a1 + k, a3 = a2 + k;
      for (let j = 0; j < n; j++) {
        const wo = j * k;
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let i = 0; i < k; i++) {
          const w = wq[wo + i];
          s0 = (s0 + Math.imul (q[a0 + i], w)) | 0;
          s1 = (s1 + Math.imul (q[a1 + i], w)) | 0;
          s2 = (s2 + Math.imul (q[a2 + i], w)) | 0;
          s3 = (s3 + Math.imul (q[a3 + i], w)) | 0;
        }
        acc[r * n + j] = s0;
        acc[(r + 1) * n + j] = s1;
        acc[(r + 2) * n + j] = s2;
        acc[(r + 3) * n + j] = s3;
      }
    }
    for (; r < rows; r++)
      for (let j = 0; j < n; j++)
        acc[r * n + j] = dot8 (q, r * k, wq, j * k, k);
    return acc;
  };

  /* y[r] = x[r] · W + b for rows r0 ≤ r < len (linear_forward ()): one
   * epilogue and one rounded bias addition per value. The epilogue is
   * epilogue () written out (the hottest loop outside the products): the
   * scale 2^(e_r + e_j) is applied as two exact multiplications by powers of
   * two, in double, where f32(acc) · 2^e_r · 2^e_j cannot round (with
   * e_r ≥ −155, e_j ≥ −1024 anything that would is far below FLT_MIN and
   * becomes zero; an infinite 2^e_j saturates like a too-large exponent). */
  Model.prototype.linear = function (what, x, r0, len, W, bias, y) {
    const n = W.n, np = W.np, ws = W.scale, e = this.rowE;
    const acc = this.gemmRows (what, x, r0, len, W);
    for (let r = r0; r < len; r++) {
      const rs = pow2 (e[r]), ao = (r - r0) * np, yo = r * n;
      for (let j = 0; j < n; j++) {
        const s = acc[ao + j];
        let v = 0;
        if (s !== 0) {
          v = f (s) * rs * ws[j];
          const a = Math.abs (v);
          if (a < FLT_MIN)
            v = v < 0 ? -0 : 0;
          else if (a >= FLT_OVER)
            v = v < 0 ? -FLT_MAX : FLT_MAX;
        }
        y[yo + j] = f (v + bias[j]);
      }
    }
  };

  /*
   * One layer over rows r0 … len − 1 (rows below r0 are cached and valid);
   * only rows ≥ rOut are needed after this layer (the last layer needs the
   * last row alone). Returns the first row it recomputed, which becomes the
   * next layer's r0: 0 when a column of v changed its exponent.
   */
  Model.prototype.layerForward = function (l, r0, rOut, len, xNext) {
    const Ly = this.layers[l];
    const C = this.C, Hn = this.H, D = this.D, C3 = 3 * C;
    const x = Ly.x, qkv = Ly.qkv, h = this.h;
    const scale = f (1 / f (Math.sqrt (D)));    /* attention_scale () */

    for (let r = r0; r < len; r++)
      layerNorm (x, r * C, Ly.ln1W, Ly.ln1B, h, r * C, C, this.sq);
    this.linear ('attention c_attn', h, r0, len, Ly.attnW, Ly.attnB, qkv);

    /* k rows per head (row-independent: cached). */
    for (let r = r0; r < len; r++)
      for (let hd = 0; hd < Hn; hd++)
        Ly.ke[r * Hn + hd] = quantize ('attention Q·Kᵀ', qkv, r * C3 + C + hd * D, 1, D,
                                       Ly.kq, r * C + hd * D);
    /* v columns over the whole window: any exponent change invalidates every
     * cached row of this layer's attention output. */
    const vcol = this.vcol;
    let changed = false;
    for (let j = 0; j < C; j++) {
      for (let r = 0; r < len; r++)
        vcol[r] = qkv[r * C3 + 2 * C + j];
      Ly.veNext[j] = quantize ('attention P·V', vcol, 0, 1, len, Ly.vq, j * len);
      if (Ly.veNext[j] !== Ly.ve[j])
        changed = true;
    }
    Ly.ve.set (Ly.veNext);
    if (changed)
      r0 = 0;
    const a0 = Math.max (r0, rOut);

    /* Attention for rows a0 … len − 1, one head at a time. */
    const scores = this.scores, attQ = this.attQ, qQ = this.qQ, vq = Ly.vq, atty = this.atty;
    for (let t = a0; t < len; t++)
      for (let hd = 0; hd < Hn; hd++) {
        const eq = quantize ('attention Q·Kᵀ', qkv, t * C3 + hd * D, 1, D, qQ, 0);
        for (let j = 0; j <= t; j++) {
          epilogueInto (scores, j, dot8 (qQ, 0, Ly.kq, j * C + hd * D, D),
                        eq + Ly.ke[j * Hn + hd]);
          scores[j] = f (scores[j] * scale);
        }
        softmax (scores, 0, t + 1);
        /* The row's zeros above the diagonal quantize to 0 and add 0. */
        const ea = quantize ('attention P·V', scores, 0, 1, t + 1, attQ, 0);
        for (let dd = 0; dd < D; dd++) {
          const col = hd * D + dd;
          epilogueInto (atty, t * C + col, dot8 (attQ, 0, vq, col * len, t + 1),
                        ea + Ly.ve[col]);
        }
      }

    const mid = this.mid, y = this.y;
    this.linear ('attention c_proj', atty, a0, len, Ly.projW, Ly.projB, mid);
    for (let i = a0 * C; i < len * C; i++)
      mid[i] = f (x[i] + mid[i]);
    for (let r = a0; r < len; r++)
      layerNorm (mid, r * C, Ly.ln2W, Ly.ln2B, h, r * C, C, this.sq);
    this.linear ('mlp c_fc', h, a0, len, Ly.fcW, Ly.fcB, y);
    for (let i = a0 * 4 * C; i < len * 4 * C; i++) {
      const v = y[i];
      /* dc_math_relu: NaN passes, −0 and negatives become +0. */
      y[i] = v !== v ? v : (v > 0 ? v : 0);
    }
    this.linear ('mlp c_proj', y, a0, len, Ly.fcprojW, Ly.fcprojB, xNext);
    for (let i = a0 * C; i < len * C; i++)
      xNext[i] = f (mid[i] + xNext[i]);
    return a0;
  };

  /* The logits of the window's last position (dc_gpt_run_forward () and
   * dc_gpt_run_get_logits ()), reusing the rows of the previous call when
   * the window only grew by one token. */
  Model.prototype.forward = function (tokens, start, len) {
    const C = this.C, L = this.L;
    let r0 = 0;

    if (len === this.windowLen + 1) {
      r0 = this.windowLen;
      for (let i = 0; i < this.windowLen; i++)
        if (this.window[i] !== tokens[start + i]) {
          r0 = 0;
          break;
        }
    }
    for (let i = 0; i < len; i++)
      this.window[i] = tokens[start + i];
    this.windowLen = len;
    if (r0 === 0)
      for (let l = 0; l < L; l++)
        this.layers[l].ve.fill (0x7fffffff);    /* no cached column: all "changed" */

    const x0 = this.layers[0].x;
    for (let r = r0; r < len; r++) {
      const te = tokens[start + r] * C, pe = r * C;
      for (let i = 0; i < C; i++)
        x0[r * C + i] = f (this.wte[te + i] + this.wpe[pe + i]);
    }
    for (let l = 0; l < L; l++) {
      const xNext = l + 1 < L ? this.layers[l + 1].x : this.out;
      r0 = this.layerForward (l, r0, l + 1 < L ? 0 : len - 1, len, xNext);
    }

    /* Final norm and the tied head, for the last row only (rows are
     * independent here). */
    const last = len - 1, h = this.h, head = this.head, logits = this.logits;
    layerNorm (this.out, last * C, this.lnfW, this.lnfB, h, 0, C, this.sq);
    const acc = this.gemmRows ('lm_head', h, 0, 1, head);
    const e = this.rowE[0];
    for (let j = 0; j < VOCAB; j++)
      epilogueInto (logits, j, acc[j], e + head.e[j]);
    return logits;
  };

  function parseSeed (seed) {
    let s;
    if (typeof seed === 'bigint')
      s = seed;
    else if (typeof seed === 'number' && Number.isSafeInteger (seed))
      s = BigInt (seed);
    else if (typeof seed === 'string' && /^\s*-?\d{1,20}\s*$/.test (seed))
      s = BigInt (seed.trim ());
    else if (seed === undefined || seed === null)
      s = 1n;                                   /* the CLI's default */
    else
      throw kitError ('bad-argument', 'the seed must be an integer');
    /* The CLI reads a signed 64-bit seed and uses it as unsigned: the same
     * wrap-around here. */
    if (s < -(1n << 63n) || s > M64)
      throw kitError ('bad-argument', 'the seed must fit 64 bits');
    return BigInt.asUintN (64, s);
  }

  /**
   * generate (promptBytes, {tokens, temperature, seed}, onToken):
   * dc_generate (): greedy when temperature is 0 (the largest logit, the
   * lowest id on ties), else the first id whose running sum of
   * softmax(logits / T) exceeds u = dc_rng_uniform (seed, 3, position),
   * position being the token's index in the whole sequence. onToken (id, i)
   * may return false to stop. Returns the ids generated.
   */
  Model.prototype.generate = function (promptBytes, options, onToken) {
    const opts = options || {};
    /* Numbers, or their decimal strings (a page's URL parameters). */
    const n = opts.tokens === undefined ? 64 : Number (opts.tokens);
    const temperature = f (opts.temperature === undefined ? 0 : Number (opts.temperature));
    const seed = parseSeed (opts.seed);
    const T = this.T;

    if (!Number.isInteger (n) || n < 0 || n > MAX_TOKENS
        || !(temperature === 0 || (temperature >= f (0.01) && temperature <= 10)))
      throw kitError ('bad-argument', 'generate at most ' + MAX_TOKENS
                      + ' tokens, with temperature 0 or 0.01–10');
    const prompt = promptBytes instanceof Uint8Array ? promptBytes
                   : new Uint8Array (promptBytes || []);
    const seq = new Uint8Array (Math.max (prompt.length, 1) + n);
    let seqLen;
    if (prompt.length === 0) {
      seq[0] = 10;                              /* an empty prompt starts from "\n" */
      seqLen = 1;
    } else {
      seq.set (prompt);
      seqLen = prompt.length;
    }
    this.windowLen = 0;
    const ids = [];
    for (let i = 0; i < n; i++) {
      const len = Math.min (seqLen, T);
      const logits = this.forward (seq, seqLen - len, len);
      let next = 0;
      if (temperature === 0) {
        for (let j = 1; j < VOCAB; j++)
          if (logits[j] > logits[next])
            next = j;
      } else {
        const u = rngUniform (seed, STREAM_SAMPLE, seqLen);
        for (let j = 0; j < VOCAB; j++)
          logits[j] = f (logits[j] / temperature);
        softmax (logits, 0, VOCAB);
        let cumulative = 0;
        next = VOCAB - 1;                       /* when rounding leaves the total just below u */
        for (let j = 0; j < VOCAB; j++) {
          cumulative = f (cumulative + logits[j]);
          if (u < cumulative) {
            next = j;
            break;
          }
        }
      }
      seq[seqLen++] = next;
      ids.push (next);
      if (onToken && onToken (next, i) === false)
        break;
    }
    return ids;
  };

  /**
   * promptLogits (promptBytes): the logits (256 f32) after the last of at
   * most seq prompt bytes, as `daisychain-cli generate --dump-logits` writes
   * for that position: the tests compare them bit for bit.
   */
  Model.prototype.promptLogits = function (promptBytes) {
    const prompt = promptBytes.length > 0 ? promptBytes : new Uint8Array ([10]);
    if (prompt.length > this.T)
      throw kitError ('bad-argument', 'at most ' + this.T + ' prompt bytes');
    this.windowLen = 0;
    return Float32Array.from (this.forward (prompt, 0, prompt.length));
  };

  const DcKit = {
    RULE_ID,
    loadModel,
    sha256Hex,
    sha256,
    /* For tests: the exact functions, to compare with the C library's. */
    _internal: { softmax, layerNorm, quantize, epilogue, rngUniform, treeSum },
  };

  root.DcKit = DcKit;
  if (typeof module !== 'undefined' && module.exports)
    module.exports = DcKit;
}) (typeof globalThis !== 'undefined' ? globalThis : this);
