/* dc-generate.c: greedy and temperature sampling, reproducible.
 *
 * Each new token runs the INT8 forward pass over the last T tokens (the
 * models are small; there is no KV cache here). With temperature 0 the
 * largest logit wins (the lowest id on ties). Otherwise the logits are divided
 * by the temperature, softmaxed with dc-math, and the token is the first
 * whose running sum (in id order) exceeds u = dc_rng_uniform (seed,
 * DC_RNG_STREAM_SAMPLE, position), position being the token's index in the
 * whole sequence (prompt included): the same seed gives the same text on
 * every device, and a token's draw does not depend on how many were drawn
 * before.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-generate.h"

#include <string.h>

#include "engine/dc-math.h"
#include "dc-gpt.h"
#include "dc-model-error.h"
#include "dc-rng.h"

/**
 * dc_generate:
 * @prompt: (array length=prompt_len): byte ids; an empty prompt starts from "\n"
 * @temperature: 0 for greedy, else 0.01–10
 * @out: receives the @n_tokens generated ids (not the prompt)
 */
gboolean
dc_generate (const DcGptModel  *model,
             const guint8      *prompt,
             gsize              prompt_len,
             guint              n_tokens,
             float              temperature,
             guint64            seed,
             GByteArray        *out,
             GError           **error)
{
  g_autoptr(DcGptRun) run = NULL;
  g_autoptr(GByteArray) seq = g_byte_array_new ();
  guint t = model->config.seq, v = model->config.vocab;
  g_autofree float *scaled = g_new (float, v);

  if (n_tokens > DC_GENERATE_MAX_TOKENS || !(temperature == 0.0f
                                             || (temperature >= 0.01f && temperature <= 10.0f)))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "generate at most %d tokens, with temperature 0 or 0.01–10",
                   DC_GENERATE_MAX_TOKENS);
      return FALSE;
    }
  run = dc_gpt_run_new (&model->config, 1, DC_GPT_PRECISION_INT8, 1);
  if (prompt_len == 0)
    g_byte_array_append (seq, (const guint8 *) "\n", 1);
  else
    g_byte_array_append (seq, prompt, prompt_len);

  for (guint i = 0; i < n_tokens; i++)
    {
      guint len = MIN (seq->len, t);
      const float *logits;
      guint next = 0;

      if (!dc_gpt_run_forward (run, model->params, seq->data + seq->len - len, NULL, 1, len,
                               NULL, error))
        return FALSE;
      logits = dc_gpt_run_get_logits (run) + (gsize) (len - 1) * v;
      if (temperature == 0.0f)
        {
          for (guint j = 1; j < v; j++)
            if (logits[j] > logits[next])
              next = j;
        }
      else
        {
          float u = dc_rng_uniform (seed, DC_RNG_STREAM_SAMPLE, seq->len);
          float cumulative = 0.0f;

          for (guint j = 0; j < v; j++)
            scaled[j] = logits[j] / temperature;
          dc_math_softmax (scaled, scaled, v);
          next = v - 1;  /* when rounding leaves the total just below u */
          for (guint j = 0; j < v; j++)
            {
              cumulative = cumulative + scaled[j];
              if (u < cumulative)
                {
                  next = j;
                  break;
                }
            }
        }
      g_byte_array_append (seq, (const guint8 *) &(guint8) { next }, 1);
      g_byte_array_append (out, (const guint8 *) &(guint8) { next }, 1);
    }
  return TRUE;
}
