/* dc-sha256-x86.c: SHA-256 of one buffer or of two at once with the x86
 * SHA extensions (SHA-NI).
 *
 * One SHA-256 is a chain: each sha256rnds2 (two rounds) needs the state the
 * one before it made, so a single stream waits out that instruction's
 * latency at every step (nettle's SHA-NI code: 1.95 GB/s on the 2-vCPU
 * EPYC VM). Two independent buffers run as two interleaved chains, each
 * filling the other's wait: 3.2 GB/s there. The state hash digests its
 * 64 KiB pieces in pairs with it (dc_gpt_hash_pieces ()). Three or four
 * chains do not fit: the SHA instructions have only legacy SSE encodings,
 * so xmm0–xmm15, and two chains already use all sixteen.
 *
 * Written from FIPS 180-4 and Intel's description of the instructions:
 * the state lives in two registers, ABEF and CDGH (lane 3 first); a group
 * of four rounds adds four schedule words and their constants, runs
 * sha256rnds2 on the low two and then the high two; from round 16 on each
 * group's words are sha256msg2 (sha256msg1 (W[t−16..], W[t−12..]) +
 * W[t−7..t−4], W[t−4..]). tests/test-sha256.c checks every length and
 * alignment against GChecksum.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-sha256-private.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <string.h>
#include <immintrin.h>

#define SHA_TARGET __attribute__ ((target ("sha,ssse3,sse4.1")))

static const guint32 round_constants[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const guint32 initial_state[8] = {
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

/* One chain's state: ABEF and CDGH. */
typedef struct
{
  __m128i abef;
  __m128i cdgh;
} Chain;

/* Big-endian message words: each 32-bit lane's bytes reversed. */
#define BSWAP32_LANES() _mm_set_epi64x (0x0c0d0e0f08090a0bll, 0x0405060700010203ll)

SHA_TARGET static inline __attribute__ ((always_inline)) __m128i
next_words (const __m128i w[4],
            int           g)
{
  __m128i t = _mm_sha256msg1_epu32 (w[(g - 4) & 3], w[(g - 3) & 3]);

  t = _mm_add_epi32 (t, _mm_alignr_epi8 (w[(g - 1) & 3], w[(g - 2) & 3], 4));
  return _mm_sha256msg2_epu32 (t, w[(g - 1) & 3]);
}

SHA_TARGET static inline __attribute__ ((always_inline)) void
four_rounds (Chain   *c,
             __m128i  words_plus_k)
{
  c->cdgh = _mm_sha256rnds2_epu32 (c->cdgh, c->abef, words_plus_k);
  c->abef = _mm_sha256rnds2_epu32 (c->abef, c->cdgh, _mm_shuffle_epi32 (words_plus_k, 0x0e));
}

SHA_TARGET static void
compress_one (Chain        *chain,
              const guint8 *p,
              gsize         n_blocks)
{
  const __m128i bswap = BSWAP32_LANES ();
  Chain c = *chain;

  for (; n_blocks > 0; n_blocks--, p += 64)
    {
      const Chain saved = c;
      __m128i w[4];

#pragma GCC unroll 16
      for (int g = 0; g < 16; g++)
        {
          const __m128i k = _mm_loadu_si128 ((const __m128i *) (round_constants + 4 * g));

          if (g < 4)
            w[g] = _mm_shuffle_epi8 (_mm_loadu_si128 ((const __m128i *) (p + 16 * g)), bswap);
          else
            w[g & 3] = next_words (w, g);
          four_rounds (&c, _mm_add_epi32 (w[g & 3], k));
        }
      c.abef = _mm_add_epi32 (c.abef, saved.abef);
      c.cdgh = _mm_add_epi32 (c.cdgh, saved.cdgh);
    }
  *chain = c;
}

/* compress_one () on two chains at once, block for block: the two bodies
 * are written side by side so that the compiler keeps them interleaved. */
SHA_TARGET static void
compress_two (Chain        *chain_a,
              Chain        *chain_b,
              const guint8 *a,
              const guint8 *b,
              gsize         n_blocks)
{
  const __m128i bswap = BSWAP32_LANES ();
  Chain ca = *chain_a, cb = *chain_b;

  for (; n_blocks > 0; n_blocks--, a += 64, b += 64)
    {
      const Chain saved_a = ca, saved_b = cb;
      __m128i wa[4], wb[4];

#pragma GCC unroll 16
      for (int g = 0; g < 16; g++)
        {
          const __m128i k = _mm_loadu_si128 ((const __m128i *) (round_constants + 4 * g));

          if (g < 4)
            {
              wa[g] = _mm_shuffle_epi8 (_mm_loadu_si128 ((const __m128i *) (a + 16 * g)), bswap);
              wb[g] = _mm_shuffle_epi8 (_mm_loadu_si128 ((const __m128i *) (b + 16 * g)), bswap);
            }
          else
            {
              wa[g & 3] = next_words (wa, g);
              wb[g & 3] = next_words (wb, g);
            }
          four_rounds (&ca, _mm_add_epi32 (wa[g & 3], k));
          four_rounds (&cb, _mm_add_epi32 (wb[g & 3], k));
        }
      ca.abef = _mm_add_epi32 (ca.abef, saved_a.abef);
      ca.cdgh = _mm_add_epi32 (ca.cdgh, saved_a.cdgh);
      cb.abef = _mm_add_epi32 (cb.abef, saved_b.abef);
      cb.cdgh = _mm_add_epi32 (cb.cdgh, saved_b.cdgh);
    }
  *chain_a = ca;
  *chain_b = cb;
}

/* H0…H7 (A first) into ABEF / CDGH and back. */
SHA_TARGET static Chain
chain_start (void)
{
  const __m128i abcd = _mm_loadu_si128 ((const __m128i *) initial_state);
  const __m128i hgfe = _mm_shuffle_epi32 (_mm_loadu_si128 ((const __m128i *) (initial_state + 4)),
                                          0x1b);
  const __m128i badc = _mm_shuffle_epi32 (abcd, 0xb1);
  Chain c;

  c.abef = _mm_alignr_epi8 (badc, hgfe, 8);
  c.cdgh = _mm_blend_epi16 (hgfe, badc, 0xf0);
  return c;
}

/* The last blocks (the @rest < 64 bytes at @tail, the 0x80 byte, zeros and
 * the message's length in bits, big-endian) and the digest's bytes. */
SHA_TARGET static void
chain_finish (Chain        *c,
              const guint8 *tail,
              gsize         rest,
              guint64       length,
              guint8        digest[DC_SHA256_SIZE])
{
  guint8 last[128] = { 0 };
  const gsize n_blocks = rest + 9 <= 64 ? 1 : 2;
  const guint64 bits = length * 8;
  guint32 h[8];

  memcpy (last, tail, rest);
  last[rest] = 0x80;
  for (int i = 0; i < 8; i++)
    last[n_blocks * 64 - 1 - i] = (guint8) (bits >> (8 * i));
  compress_one (c, last, n_blocks);

  {
    const __m128i feba = _mm_shuffle_epi32 (c->abef, 0x1b);
    const __m128i dchg = _mm_shuffle_epi32 (c->cdgh, 0xb1);

    _mm_storeu_si128 ((__m128i *) h, _mm_blend_epi16 (feba, dchg, 0xf0));
    _mm_storeu_si128 ((__m128i *) (h + 4), _mm_alignr_epi8 (dchg, feba, 8));
  }
  for (int i = 0; i < 8; i++)
    {
      digest[4 * i] = (guint8) (h[i] >> 24);
      digest[4 * i + 1] = (guint8) (h[i] >> 16);
      digest[4 * i + 2] = (guint8) (h[i] >> 8);
      digest[4 * i + 3] = (guint8) h[i];
    }
}

gboolean
_dc_sha256_x86_available (void)
{
  unsigned eax, ebx, ecx, edx;

  /* CPUID.1:ECX bit 9 SSSE3, bit 19 SSE4.1; CPUID.(7, 0):EBX bit 29 SHA. */
  if (!__get_cpuid (1, &eax, &ebx, &ecx, &edx) || !(ecx >> 9 & 1) || !(ecx >> 19 & 1))
    return FALSE;
  if (!__get_cpuid_count (7, 0, &eax, &ebx, &ecx, &edx))
    return FALSE;
  return ebx >> 29 & 1;
}

SHA_TARGET static Chain
chain_load (const DcSha256X86 *s)
{
  Chain c;

  c.abef = _mm_loadu_si128 ((const __m128i *) s->chain);
  c.cdgh = _mm_loadu_si128 ((const __m128i *) (s->chain + 16));
  return c;
}

SHA_TARGET static void
chain_store (DcSha256X86 *s,
             Chain        c)
{
  _mm_storeu_si128 ((__m128i *) s->chain, c.abef);
  _mm_storeu_si128 ((__m128i *) (s->chain + 16), c.cdgh);
}

SHA_TARGET void
_dc_sha256_x86_init (DcSha256X86 *s)
{
  memset (s, 0, sizeof *s);
  chain_store (s, chain_start ());
}

SHA_TARGET void
_dc_sha256_x86_update (DcSha256X86 *s,
                       const void  *data,
                       gsize        length)
{
  const guint8 *p = data;
  Chain c = chain_load (s);

  s->length += length;
  if (s->fill > 0)
    {
      const gsize take = MIN (64 - s->fill, length);

      memcpy (s->block + s->fill, p, take);
      s->fill += (guint) take;
      p += take;
      length -= take;
      if (s->fill < 64)
        return;
      compress_one (&c, s->block, 1);
      s->fill = 0;
    }
  compress_one (&c, p, length / 64);
  memcpy (s->block, p + length / 64 * 64, length % 64);
  s->fill = (guint) (length % 64);
  chain_store (s, c);
}

SHA_TARGET void
_dc_sha256_x86_update_pair (DcSha256X86 *a,
                            const void  *a_data,
                            DcSha256X86 *b,
                            const void  *b_data,
                            gsize        length)
{
  const guint8 *pa = a_data, *pb = b_data;
  Chain ca, cb;

  /* Chains at different offsets in their blocks cannot go block for block. */
  if (a->fill != b->fill || a == b)
    {
      _dc_sha256_x86_update (a, a_data, length);
      _dc_sha256_x86_update (b, b_data, length);
      return;
    }
  ca = chain_load (a);
  cb = chain_load (b);
  a->length += length;
  b->length += length;
  if (a->fill > 0)
    {
      const gsize take = MIN (64 - a->fill, length);

      memcpy (a->block + a->fill, pa, take);
      memcpy (b->block + b->fill, pb, take);
      a->fill += (guint) take;
      b->fill += (guint) take;
      pa += take;
      pb += take;
      length -= take;
      if (a->fill < 64)
        return;
      compress_two (&ca, &cb, a->block, b->block, 1);
      a->fill = b->fill = 0;
    }
  compress_two (&ca, &cb, pa, pb, length / 64);
  memcpy (a->block, pa + length / 64 * 64, length % 64);
  memcpy (b->block, pb + length / 64 * 64, length % 64);
  a->fill = b->fill = (guint) (length % 64);
  chain_store (a, ca);
  chain_store (b, cb);
}

SHA_TARGET void
_dc_sha256_x86_final (DcSha256X86 *s,
                      guint8       digest[DC_SHA256_SIZE])
{
  Chain c = chain_load (s);

  chain_finish (&c, s->block, s->fill, s->length, digest);
}

#else

gboolean
_dc_sha256_x86_available (void)
{
  return FALSE;
}

void
_dc_sha256_x86_init (DcSha256X86 *s)
{
  g_assert_not_reached ();
}

void
_dc_sha256_x86_update (DcSha256X86 *s,
                       const void  *data,
                       gsize        length)
{
  g_assert_not_reached ();
}

void
_dc_sha256_x86_update_pair (DcSha256X86 *a,
                            const void  *a_data,
                            DcSha256X86 *b,
                            const void  *b_data,
                            gsize        length)
{
  g_assert_not_reached ();
}

void
_dc_sha256_x86_final (DcSha256X86 *s,
                      guint8       digest[DC_SHA256_SIZE])
{
  g_assert_not_reached ();
}

#endif
