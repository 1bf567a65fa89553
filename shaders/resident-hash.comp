#version 450
#extension GL_EXT_control_flow_attributes : require
/* resident-hash.comp: the state hash's piece digests on the device
 * (docs/VERIFICATION.md, "State hash"; dc_gpt_hash_pieces () on the CPU).
 *
 * One invocation digests one piece of an array of little-endian float32
 * words with SHA-256 (FIPS 180-4): piece k is words [k·P, min ((k+1)·P, n)),
 * P = piece_words. SHA-256 reads its message as big-endian words, so each
 * word's bytes are swapped on the way in; the digest's eight words are
 * swapped on the way out, so that the digest buffer holds the digests'
 * bytes in order, as the host's SHA-256 writes them. A piece's length is a
 * whole number of words, so the padding's 0x80 byte starts a word.
 *
 * Three arrays of n words each (the weights and both Adam moments: bindings
 * 0, 1, 2), one row of the grid each (gl_WorkGroupID.y); their digests go
 * to binding 3, array after array: array a's piece k at a · n_pieces + k.
 * Push constants: n (words in each array), piece_words.
 *
 * DC_BREAK builds the deliberately wrong twin: the padding's length counts
 * bytes instead of bits, so every digest differs from SHA-256's.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

layout (local_size_x = 64) in;

layout (std430, binding = 0) readonly buffer Data0 { uint data0[]; };
layout (std430, binding = 1) readonly buffer Data1 { uint data1[]; };
layout (std430, binding = 2) readonly buffer Data2 { uint data2[]; };
layout (std430, binding = 3) writeonly buffer Digests { uint digests[]; };

layout (push_constant) uniform Push
{
  uint n;
  uint piece_words;
} p;

const uint K[64] = uint[64] (
  0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
  0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
  0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
  0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
  0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
  0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
  0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
  0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
  0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
  0xc67178f2u);

uint
rotr (uint x, uint k)
{
  return (x >> k) | (x << (32u - k));
}

uint
bswap (uint x)
{
  return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

/* Word i of this workgroup's array (the same branch for the whole grid
 * row). */
uint
load (uint i)
{
  uint a = gl_WorkGroupID.y;

  return bswap (a == 0u ? data0[i] : a == 1u ? data1[i] : data2[i]);
}

/* One compression of the 16-word block w into h. */
void
compress (inout uint h[8], inout uint w[16])
{
  uint a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];

  /* Unrolled: llvmpipe (lavapipe) ends a loop after 65,535 iterations of
   * an invocation in all, which 64 rounds of a 64 KiB piece's 1,024
   * blocks pass (its digests were wrong from about 1,000 blocks on). */
  [[unroll]] for (uint t = 0u; t < 64u; t++)
    {
      uint wt;

      if (t < 16u)
        wt = w[t];
      else
        {
          /* The schedule in place: w[t mod 16] becomes W_t. */
          uint w15 = w[(t + 1u) & 15u], w2 = w[(t + 14u) & 15u];
          uint s0 = rotr (w15, 7u) ^ rotr (w15, 18u) ^ (w15 >> 3);
          uint s1 = rotr (w2, 17u) ^ rotr (w2, 19u) ^ (w2 >> 10);

          wt = w[t & 15u] + s0 + w[(t + 9u) & 15u] + s1;
          w[t & 15u] = wt;
        }
      {
        uint S1 = rotr (e, 6u) ^ rotr (e, 11u) ^ rotr (e, 25u);
        uint ch = (e & f) ^ (~e & g);
        uint t1 = hh + S1 + ch + K[t] + wt;
        uint S0 = rotr (a, 2u) ^ rotr (a, 13u) ^ rotr (a, 22u);
        uint maj = (a & b) ^ (a & c) ^ (b & c);
        uint t2 = S0 + maj;

        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
      }
    }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d;
  h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void
main ()
{
  uint piece = gl_GlobalInvocationID.x;
  uint n_pieces = p.n / p.piece_words + (p.n % p.piece_words != 0u ? 1u : 0u);
  uint h[8] = uint[8] (0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu,
                       0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u);
  uint w[16];
  uint first, len, full, rem;
  uint bits;

  if (piece >= n_pieces)
    return;
  first = piece * p.piece_words;
  len = min (p.piece_words, p.n - first);
  full = len / 16u;
  rem = len % 16u;
  for (uint blk = 0u; blk < full; blk++)
    {
      uint base = first + blk * 16u;

      [[unroll]] for (uint i = 0u; i < 16u; i++)
        w[i] = load (base + i);
      compress (h, w);
    }
  /* The tail, then 0x80, zeros and the message's length in bits (a
   * 64-bit big-endian count; a piece is far below 2^32 bits). */
#ifdef DC_BREAK
  bits = len * 4u;
#else
  bits = len * 32u;
#endif
  for (uint i = 0u; i < 16u; i++)
    w[i] = i < rem ? load (first + full * 16u + i) : (i == rem ? 0x80000000u : 0u);
  if (rem >= 14u)
    {
      compress (h, w);
      for (uint i = 0u; i < 16u; i++)
        w[i] = 0u;
    }
  w[14] = 0u;
  w[15] = bits;
  compress (h, w);
  for (uint i = 0u; i < 8u; i++)
    digests[(gl_WorkGroupID.y * n_pieces + piece) * 8u + i] = bswap (h[i]);
}
