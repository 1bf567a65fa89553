/* bench-hf-decode.c: DcHfModel's prefill and decode speed on one device,
 * for a model folder (config.json + safetensors), without the session layer.
 *
 *   build/tests/bench-hf-decode DIR [THREADS [DECODE_TOKENS [RUNS]]]
 *
 * Loads DIR on the CPU backend with THREADS threads (default 2), then RUNS
 * times (default 5): resets the cache, prefills a 64-token prompt and
 * decodes DECODE_TOKENS (default 128) tokens one at a time, feeding fixed
 * ids (the speed does not depend on them). Prints one JSON line with the
 * median rates and the peak resident memory, like llama.cpp's anchor
 * (../shared/anchors/llamacpp/run.sh) on the same shape. Not a test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "engine/dc-gemm-backend.h"
#include "model/dc-hf-config.h"
#include "model/dc-hf-model.h"
#include "model/dc-tensor-source-files.h"

#define PROMPT 64

static int
compare_doubles (gconstpointer a,
                 gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

static double
median (double *values,
        guint   n)
{
  qsort (values, n, sizeof (double), (int (*) (const void *, const void *)) compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int
main (int    argc,
      char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcHfConfig) config = NULL;
  g_autoptr(DcTensorSource) source = NULL;
  g_autoptr(DcGemmBackend) backend = NULL;
  g_autoptr(DcHfModel) model = NULL;
  g_autoptr(DcHfKvCache) cache = NULL;
  g_autofree char *config_path = NULL;
  g_autofree float *logits = NULL;
  g_autofree double *prefill = NULL, *decode = NULL;
  guint threads, tokens, runs;
  guint32 ids[PROMPT];
  struct rusage usage;

  if (argc < 2)
    {
      g_printerr ("usage: %s DIR [THREADS [DECODE_TOKENS [RUNS]]]\n", argv[0]);
      return 2;
    }
  threads = argc > 2 ? (guint) CLAMP (atoi (argv[2]), 1, 1024) : 2;
  tokens = argc > 3 ? (guint) CLAMP (atoi (argv[3]), 1, 1 << 20) : 128;
  runs = argc > 4 ? (guint) CLAMP (atoi (argv[4]), 1, 1000) : 5;

  config_path = g_build_filename (argv[1], "config.json", NULL);
  if ((config = dc_hf_config_new_from_file (config_path, &error)) == NULL ||
      (source = dc_tensor_source_files_new (argv[1], &error)) == NULL ||
      (backend = dc_gemm_backend_new (DC_BACKEND_CPU, &error)) == NULL)
    goto fail;
  dc_gemm_backend_set_n_threads (backend, threads);
  if ((model = dc_hf_model_load (config, source, backend, NULL, NULL, NULL, &error)) == NULL ||
      (cache = dc_hf_kv_cache_new (model, MIN (PROMPT + tokens, config->max_positions),
                                   &error)) == NULL)
    goto fail;
  if (PROMPT + tokens > config->max_positions)
    {
      g_printerr ("%u + %u positions exceed the model's %u\n", PROMPT, tokens,
                  config->max_positions);
      return 2;
    }

  for (guint i = 0; i < PROMPT; i++)
    ids[i] = (i * 7919u + 13u) % config->vocab_size;
  logits = g_new (float, config->vocab_size);
  prefill = g_new (double, runs);
  decode = g_new (double, runs);
  for (guint r = 0; r < runs; r++)
    {
      gint64 t0, t1, t2;

      dc_hf_kv_cache_reset (cache);
      t0 = g_get_monotonic_time ();
      if (!dc_hf_model_forward (model, cache, ids, PROMPT, logits, &error))
        goto fail;
      t1 = g_get_monotonic_time ();
      for (guint i = 0; i < tokens; i++)
        {
          guint32 id = (i * 31u + 7u) % config->vocab_size;

          if (!dc_hf_model_forward (model, cache, &id, 1, logits, &error))
            goto fail;
        }
      t2 = g_get_monotonic_time ();
      prefill[r] = PROMPT / ((t1 - t0) / 1e6);
      decode[r] = tokens / ((t2 - t1) / 1e6);
    }
  getrusage (RUSAGE_SELF, &usage);
  g_print ("{\"model\": \"%s\", \"threads\": %u, \"kernel\": \"%s\", \"prefill_tok_s\": %.1f, "
           "\"decode_tok_s\": %.1f, \"peak_rss_mib\": %.1f}\n",
           argv[1], threads, dc_gemm_backend_get_kernel_name (backend), median (prefill, runs),
           median (decode, runs), usage.ru_maxrss / 1024.0);
  return 0;

fail:
  g_printerr ("%s\n", error->message);
  return 1;
}
