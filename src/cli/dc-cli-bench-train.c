/* dc-cli-bench-train.c: `daisychain-cli bench train`, training tokens per
 * second on each backend next to PyTorch training the same GPT-2 in f32.
 *
 * The PyTorch side (scripts/bench-train-torch.py, carried inside the program
 * as a resource) runs in the same invocation, on the CPU with as many threads
 * as ours, and on CUDA where present. Without PyTorch its fields are null.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"
#include "dc-cli-python.h"
#include "dc-cli-resources.h"
#include "data/dc-corpus.h"
#include "engine/dc-parallel.h"
#include "model/dc-gpt-trainer.h"
#include "model/dc-gpt-vk-forward.h"
#include "train/dc-token-source.h"

typedef struct
{
  guint width, seq, batch;
} BenchSize;

static const BenchSize sizes[] = {
  { 32, 32, 8 },     /* the seeds' default */
  { 128, 128, 32 },  /* the largest */
};

/* Our tokens per second: one warm-up step, then steps until min_time. */
static gboolean
bench_ours (const BenchSize  *size,
            DcBackendKind     kind,
            guint             n_threads,
            double            min_time,
            GBytes           *corpus,
            double           *tokens_per_s,
            guint            *steps,
            double            shares[3],
            double            resident_shares[4],
            const char      **resident,
            char            **device_name,
            GError          **error)
{
  DcGptRunTimes times0, times1;
  DcGptVkStepTimes resident0 = { 0 }, resident1 = { 0 };
  DcGptVkForwardTimes pass0 = { 0 }, pass1 = { 0 };
  DcGptVkStep *vk_step;
  DcGptVkForward *vk_pass;
  DcParallelStats pool0, pool1;
  g_autoptr(DcGptTrainer) trainer = NULL;
  DcTrainSettings settings;
  DcGptConfig config;
  DcGptModel *model;
  gint64 start;
  double elapsed;

  dc_train_settings_init_default (&settings);
  settings.batch = size->batch;
  dc_gpt_config_init_derived (&config, size->width, size->seq);
  model = dc_gpt_model_new (&config, error);
  if (model == NULL)
    return FALSE;
  dc_gpt_model_init_weights (model, 1);
  trainer = dc_token_source_new_trainer (model, &settings, corpus, DC_GPT_PRECISION_INT8, n_threads,
                                         error);
  if (trainer == NULL)
    return FALSE;
  if (kind == DC_BACKEND_VULKAN)
    {
      DcGemmBackend *device = dc_gemm_backend_new (kind, error);

      if (device == NULL)
        return FALSE;
      if (dc_gemm_backend_get_kind (device) != DC_BACKEND_VULKAN)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                       "every Vulkan GEMM kernel was refused on %s",
                       dc_gemm_backend_get_device_name (device));
          dc_gemm_backend_free (device);
          return FALSE;
        }
      *device_name = g_strdup (dc_gemm_backend_get_device_name (device));
      dc_gpt_trainer_set_device (trainer, device, DC_GPT_TRAINER_OFFLOAD_MIN);
    }
  else
    *device_name = g_strdup ("cpu");

  if (!dc_gpt_trainer_step (trainer, NULL, error))
    return FALSE;
  *steps = 0;
  vk_step = dc_gpt_trainer_get_resident_step (trainer);
  vk_pass = dc_gpt_trainer_get_resident_pass (trainer);
  *resident = vk_step == NULL ? NULL
              : vk_pass != NULL ? "forward,backward,adam" : dc_gpt_vk_step_get_resident (vk_step);
  if (vk_step != NULL)
    dc_gpt_vk_step_get_times (vk_step, &resident0);
  if (vk_pass != NULL)
    dc_gpt_vk_forward_get_times (vk_pass, &pass0);
  dc_gpt_run_get_times (dc_gpt_trainer_get_run (trainer), &times0);
  dc_parallel_get_stats (&pool0);
  start = g_get_monotonic_time ();
  do
    {
      if (!dc_gpt_trainer_step (trainer, NULL, error))
        return FALSE;
      (*steps)++;
      elapsed = (g_get_monotonic_time () - start) / 1e6;
    }
  while (elapsed < min_time || *steps < 2);
  *tokens_per_s = (double) *steps * size->batch * size->seq / elapsed;
  /* Where the calling thread's time went: products (without their waits),
   * waiting for the pool's helpers anywhere, and the rest (other kernels,
   * attention, the optimizer, on this thread). */
  dc_gpt_run_get_times (dc_gpt_trainer_get_run (trainer), &times1);
  dc_parallel_get_stats (&pool1);
  {
    double total_ns = elapsed * 1e9;
    double gemm = (double) (times1.gemm_ns - times0.gemm_ns)
                  - (double) (times1.gemm_wait_ns - times0.gemm_wait_ns);
    double wait = (double) (pool1.wait_ns - pool0.wait_ns);

    shares[0] = CLAMP (gemm / total_ns, 0.0, 1.0);
    shares[2] = CLAMP (wait / total_ns, 0.0, 1.0 - shares[0]);
    shares[1] = 1.0 - shares[0] - shares[2];
    /* Of the rest, the resident step's submissions (its transfers and
     * kernels, waited for) and its host copies. */
    if (vk_step != NULL)
      {
        dc_gpt_vk_step_get_times (vk_step, &resident1);
        resident_shares[0] = CLAMP ((resident1.device_ns - resident0.device_ns) / total_ns,
                                    0.0, 1.0);
        resident_shares[1] = CLAMP ((resident1.host_ns - resident0.host_ns) / total_ns, 0.0, 1.0);
      }
    /* The resident forward and backward passes' submission (the weights'
     * upload, every kernel, the gradients' download) and host copies;
     * fetched again, as a failed replay hands the passes back to the CPU. */
    vk_pass = dc_gpt_trainer_get_resident_pass (trainer);
    if (vk_pass != NULL)
      {
        dc_gpt_vk_forward_get_times (vk_pass, &pass1);
        resident_shares[2] = CLAMP ((pass1.device_ns - pass0.device_ns) / total_ns, 0.0, 1.0);
        resident_shares[3] = CLAMP ((pass1.host_ns - pass0.host_ns) / total_ns, 0.0, 1.0);
      }
  }
  return TRUE;
}

/* Forward passes per second up to the logits, resident on the device and on
 * the CPU with n_threads (the same weights and tokens; the bits are equal,
 * test-model-gpt-vk-step). Each side: one warm-up, then passes until
 * min_time (at least 2). Fills tokens/s, or leaves -1 with a message. */
static void
bench_resident_forward (const BenchSize  *size,
                        guint             n_threads,
                        double            min_time,
                        double           *resident_tps,
                        double           *cpu_tps)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(DcGptVkForward) fwd = NULL;
  g_autoptr(DcGptRun) run = NULL;
  g_autofree guint8 *tokens = NULL;
  g_autofree float *logits = NULL;
  gsize bt = (gsize) size->batch * size->seq;
  DcGptConfig config;

  *resident_tps = *cpu_tps = -1;
  dc_gpt_config_init_derived (&config, size->width, size->seq);
  model = dc_gpt_model_new (&config, &error);
  if (model == NULL)
    return;
  dc_gpt_model_init_weights (model, 1);
  tokens = g_new (guint8, bt + 1);
  for (gsize i = 0; i <= bt; i++)
    tokens[i] = (guint8) (32 + (i * 7919) % 95);
  logits = g_new (float, bt * config.vocab);
  fwd = dc_gpt_vk_forward_new (&config, size->batch, &error);
  run = dc_gpt_run_new (&config, size->batch, DC_GPT_PRECISION_INT8, n_threads);
  for (guint side = 0; side < 2; side++)
    {
      guint passes = 0;
      gint64 start = 0;
      double elapsed = 0;

      if (side == 0 && fwd == NULL)
        {
          g_printerr ("daisychain-cli: bench train: resident forward: %s\n", error->message);
          continue;
        }
      for (guint i = 0; elapsed < min_time || passes < 2; i++)
        {
          gboolean ok = side == 0
                        ? dc_gpt_vk_forward_run (fwd, model->params, tokens, tokens + 1, logits,
                                                   NULL, &error)
                        : dc_gpt_run_forward (run, model->params, tokens, tokens + 1,
                                              size->batch, size->seq, NULL, &error);

          if (!ok)
            {
              g_printerr ("daisychain-cli: bench train: forward: %s\n", error->message);
              return;
            }
          if (i == 0)
            {
              start = g_get_monotonic_time ();
              continue;
            }
          passes++;
          elapsed = (g_get_monotonic_time () - start) / 1e6;
        }
      *(side == 0 ? resident_tps : cpu_tps) = (double) passes * bt / elapsed;
    }
}

/* Runs the PyTorch script; fills cpu[i] and cuda[i] (< 0 when not measured). */
static void
bench_torch (guint    n_threads,
             double   min_time,
             double  *cpu,
             double  *cuda,
             char   **version)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL;
  g_auto(GStrv) lines = NULL;
  char min_time_text[G_ASCII_DTOSTR_BUF_SIZE];

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    cpu[i] = cuda[i] = -1;
  g_ptr_array_add (args, g_strdup_printf ("%u", n_threads));
  g_ptr_array_add (args, g_strdup (g_ascii_dtostr (min_time_text, sizeof min_time_text,
                                                   min_time)));
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      DcGptConfig config;

      dc_gpt_config_init_derived (&config, sizes[i].width, sizes[i].seq);
      g_ptr_array_add (args, g_strdup_printf ("%u,%u,%u,%u,%u", sizes[i].width, sizes[i].seq,
                                              sizes[i].batch, config.n_layer, config.n_head));
    }
  g_ptr_array_add (args, NULL);
  out = dc_cli_python_run (RESOURCE_BASE "/cli/bench-train-torch.py",
                           (const char * const *) args->pdata, NULL);
  if (out == NULL)
    return;
  lines = g_strsplit (out, "\n", -1);
  for (guint l = 0; lines[l] != NULL; l++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *o;
      const char *spec, *device;

      if (*lines[l] == '\0' || !json_parser_load_from_data (parser, lines[l], -1, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue;
      o = json_node_get_object (json_parser_get_root (parser));
      spec = json_object_get_string_member_with_default (o, "spec", "");
      device = json_object_get_string_member_with_default (o, "device", "");
      g_free (*version);
      *version = g_strdup_printf ("torch %s, %" G_GINT64_FORMAT " threads",
                                  json_object_get_string_member_with_default (o, "torch", "?"),
                                  json_object_get_int_member_with_default (o, "threads", 0));
      for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
        {
          g_autofree char *prefix = g_strdup_printf ("%u,%u,%u,", sizes[i].width,
                                                     sizes[i].seq, sizes[i].batch);

          if (g_str_has_prefix (spec, prefix))
            *(g_str_equal (device, "cuda") ? &cuda[i] : &cpu[i]) =
              json_object_get_double_member_with_default (o, "tokens_per_s", -1);
        }
    }
}


static void
add_rate (JsonBuilder *builder,
          const char  *name,
          double       value)
{
  json_builder_set_member_name (builder, name);
  if (value > 0)
    json_builder_add_double_value (builder, value);
  else
    json_builder_add_null_value (builder);
}

/* A share of time, rounded to 3 decimals; null when not measured. */
static void
add_share (JsonBuilder *builder,
           const char  *name,
           double       value)
{
  json_builder_set_member_name (builder, name);
  if (value < 0)
    json_builder_add_null_value (builder);
  else
    json_builder_add_double_value (builder, (double) (gint64) (value * 1000.0 + 0.5) / 1000.0);
}

int
dc_cli_bench_train_run (const DcCliCommand  *command,
                        DcCliOptions        *options,
                        int                  argc,
                        char               **argv)
{
  int threads = 0;
  double min_time = 3.0;
  gboolean no_torch = FALSE, no_vulkan = FALSE, resident_forward = FALSE;
  const GOptionEntry entries[] = {
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, N_("Threads for us and PyTorch (all cores)"),
      "N" },
    { "min-time", 0, 0, G_OPTION_ARG_DOUBLE, &min_time, N_("Seconds per measurement (3)"), "S" },
    { "no-torch", 0, 0, G_OPTION_ARG_NONE, &no_torch, N_("Skip the PyTorch reference"), NULL },
    { "no-vulkan", 0, 0, G_OPTION_ARG_NONE, &no_vulkan, N_("Measure the CPU only"), NULL },
    { "resident-forward", 0, 0, G_OPTION_ARG_NONE, &resident_forward,
      N_("Also time the forward pass resident on the Vulkan device against the CPU's"), NULL },
    { NULL }
  };
  g_autoptr(GBytes) corpus = NULL;
  g_autofree char *torch_version = NULL;
  double torch_cpu[G_N_ELEMENTS (sizes)], torch_cuda[G_N_ELEMENTS (sizes)];
  const DcBackendKind kinds[] = { DC_BACKEND_CPU, DC_BACKEND_VULKAN };

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (threads <= 0)
    threads = g_get_num_processors ();
  /* The process's pool default too, for any kernel not handed a count. */
  dc_parallel_set_default_threads ((guint) threads);
  if (min_time <= 0 || min_time > 600)
    return dc_cli_usage_error (command, _("--min-time must be in (0, 600]"));

  corpus = dc_corpus_dup_builtin ();
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    torch_cpu[i] = torch_cuda[i] = -1;
  if (!no_torch)
    bench_torch (threads, min_time, torch_cpu, torch_cuda, &torch_version);

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
      {
        g_autoptr(GError) error = NULL;
        g_autofree char *device = NULL;
        double tps = -1;
        double shares[3] = { -1, -1, -1 };
        double resident_shares[4] = { -1, -1, -1, -1 };
        double fwd_resident = -1, fwd_cpu = -1;
        const char *resident = NULL;
        guint steps = 0;

        if (kinds[k] == DC_BACKEND_VULKAN && no_vulkan)
          continue;
        if (!bench_ours (&sizes[i], kinds[k], threads, min_time, corpus, &tps, &steps, shares,
                         resident_shares, &resident, &device, &error))
          {
            g_printerr ("daisychain-cli: bench train %s: %s\n",
                        dc_backend_kind_to_string (kinds[k]), error->message);
            continue;
          }
        if (resident_forward && kinds[k] == DC_BACKEND_VULKAN)
          bench_resident_forward (&sizes[i], threads, min_time, &fwd_resident, &fwd_cpu);
        if (options->json)
          {
            g_autoptr(JsonBuilder) builder = json_builder_new ();

            json_builder_begin_object (builder);
            json_builder_set_member_name (builder, "width");
            json_builder_add_int_value (builder, sizes[i].width);
            json_builder_set_member_name (builder, "seq");
            json_builder_add_int_value (builder, sizes[i].seq);
            json_builder_set_member_name (builder, "batch");
            json_builder_add_int_value (builder, sizes[i].batch);
            json_builder_set_member_name (builder, "backend");
            json_builder_add_string_value (builder, dc_backend_kind_to_string (kinds[k]));
            json_builder_set_member_name (builder, "device");
            json_builder_add_string_value (builder, device);
            json_builder_set_member_name (builder, "threads");
            json_builder_add_int_value (builder, threads);
            json_builder_set_member_name (builder, "steps");
            json_builder_add_int_value (builder, steps);
            add_rate (builder, "tokens_per_s", tps);
            /* Shares of the calling thread's time per step (sum 1). */
            add_share (builder, "gemm_share", shares[0]);
            add_share (builder, "other_share", shares[1]);
            add_share (builder, "wait_share", shares[2]);
            /* What runs resident on the device, and its part of other_share. */
            json_builder_set_member_name (builder, "resident");
            if (resident != NULL)
              json_builder_add_string_value (builder, resident);
            else
              json_builder_add_null_value (builder);
            add_share (builder, "resident_device_share", resident_shares[0]);
            add_share (builder, "resident_host_share", resident_shares[1]);
            /* The resident forward and backward passes (resident names
             * "forward"): their submission and host copies, of other_share. */
            add_share (builder, "resident_pass_device_share", resident_shares[2]);
            add_share (builder, "resident_pass_host_share", resident_shares[3]);
            /* --resident-forward: forward passes up to the logits, tokens/s. */
            add_rate (builder, "resident_forward_tokens_per_s", fwd_resident);
            add_rate (builder, "cpu_forward_tokens_per_s", fwd_cpu);
            add_rate (builder, "torch_cpu_tokens_per_s", torch_cpu[i]);
            add_rate (builder, "torch_cuda_tokens_per_s", torch_cuda[i]);
            add_rate (builder, "ratio_vs_torch_cpu", torch_cpu[i] > 0 ? tps / torch_cpu[i] : -1);
            json_builder_set_member_name (builder, "torch");
            if (torch_version != NULL)
              json_builder_add_string_value (builder, torch_version);
            else
              json_builder_add_null_value (builder);
            json_builder_end_object (builder);
            dc_cli_print_json (builder);
          }
        else
          g_print ("width %3u seq %3u batch %2u  %-6s %10.0f tokens/s   torch cpu %10.0f   "
                   "ratio %.2f\n", sizes[i].width, sizes[i].seq, sizes[i].batch,
                   dc_backend_kind_to_string (kinds[k]), tps, torch_cpu[i],
                   torch_cpu[i] > 0 ? tps / torch_cpu[i] : 0.0);
      }
  if (!options->json && torch_version != NULL)
    g_print ("PyTorch: %s\n", torch_version);
  return DC_CLI_EXIT_OK;
}
