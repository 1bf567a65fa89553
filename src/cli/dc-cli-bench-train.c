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
#include <string.h>

#include "dc-cli.h"
#include "dc-cli-python.h"
#include "dc-cli-resources.h"
#include "data/dc-corpus.h"
#include "engine/dc-parallel.h"
#include "model/dc-gpt-trainer.h"
#include "model/dc-gpt-vk-forward.h"
#include "train/dc-token-source.h"

/* One size of --sizes: layers and heads 0 take dc_gpt_config_init_derived ()'s. */
typedef struct
{
  const char *name;
  guint width, seq, batch, layers, heads;
} BenchSize;

static const BenchSize presets[] = {
  { "default", 32, 32, 8, 0, 0 },      /* the seeds' default */
  { "w128", 128, 128, 32, 0, 0 },      /* the seeds' largest */
  /* GPT-2-small's shape at batch 2, the smallest a run takes: the resident
   * pass keeps every activation in one storage buffer with 32-bit offsets
   * (dc-gpt-vk-forward.c, F), 3.30 GB at batch 2, inside the 4 GiB − 1
   * binding the largest devices report; batch 3 (4.61 GB) would pass 2³²
   * bytes, which no binding holds. */
  { "gpt2-small", 768, 1024, 2, 12, 12 },
};

/* --sizes takes at most this many entries: each costs a PyTorch run and
 * ours per round, and 8 already spans every preset and a few shapes. */
#define MAX_SIZES 8
/* Batch of a W/S/B size: what a run takes (DcTrainSettings, 2–32). */
#define BENCH_BATCH_MIN 2
#define BENCH_BATCH_MAX 32

static void
size_config (const BenchSize *size,
             DcGptConfig     *config)
{
  dc_gpt_config_init_derived (config, size->width, size->seq);
  if (size->layers > 0)
    config->n_layer = size->layers;
  if (size->heads > 0)
    config->n_head = size->heads;
}

/* Parses --sizes: names of presets[] or W/S/B[/L/H], comma-separated. */
static GArray *
parse_sizes (const char  *text,
             GError     **error)
{
  g_autoptr(GArray) out = g_array_new (FALSE, TRUE, sizeof (BenchSize));
  g_auto(GStrv) items = g_strsplit (text, ",", -1);

  for (guint i = 0; items[i] != NULL; i++)
    {
      g_auto(GStrv) parts = NULL;
      BenchSize size = { NULL, 0, 0, 0, 0, 0 };
      guint *fields[] = { &size.width, &size.seq, &size.batch, &size.layers, &size.heads };
      guint n_parts, j;
      DcGptConfig config;

      g_strstrip (items[i]);
      for (j = 0; j < G_N_ELEMENTS (presets); j++)
        if (g_str_equal (items[i], presets[j].name))
          break;
      if (j < G_N_ELEMENTS (presets))
        size = presets[j];
      else
        {
          parts = g_strsplit (items[i], "/", -1);
          n_parts = g_strv_length (parts);
          if (n_parts != 3 && n_parts != 5)
            {
              g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                           "size “%s”: expected default, w128, gpt2-small or "
                           "WIDTH/SEQ/BATCH[/LAYERS/HEADS]", items[i]);
              return NULL;
            }
          for (j = 0; j < n_parts; j++)
            {
              guint64 value;

              if (!g_ascii_string_to_unsigned (parts[j], 10, 1, G_MAXUINT16, &value, NULL))
                {
                  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                               "size “%s”: “%s” is not a number from 1 to %u", items[i],
                               parts[j], G_MAXUINT16);
                  return NULL;
                }
              *fields[j] = (guint) value;
            }
          size.name = g_intern_string (items[i]);
          if (size.batch < BENCH_BATCH_MIN || size.batch > BENCH_BATCH_MAX)
            {
              g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                           "size “%s”: batch must be %d–%d", items[i], BENCH_BATCH_MIN,
                           BENCH_BATCH_MAX);
              return NULL;
            }
        }
      size_config (&size, &config);
      if (!dc_gpt_config_validate (&config, error))
        {
          g_prefix_error (error, "size “%s”: ", items[i]);
          return NULL;
        }
      if (out->len == MAX_SIZES)
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       "at most %d sizes", MAX_SIZES);
          return NULL;
        }
      g_array_append_val (out, size);
    }
  return g_steal_pointer (&out);
}

/* One measurement of ours: tokens per second and where the calling
 * thread's time went, as shares of the measured steps' wall time. */
typedef struct
{
  double      tokens_per_s;
  guint       steps;
  double      shares[3];            /* gemm, other, wait (sum 1) */
  double      resident_shares[4];   /* resident step device, host; resident passes device, host */
  double      phase_shares[DC_GPT_N_PHASES];
  double      phase_threads[DC_GPT_N_PHASES];   /* threads a pass asked for, on average */
  double      gemm_total_share;     /* products, their waits included */
  double      optimizer_share;      /* the Adam step */
  double      rest_share;           /* batches, copies, anything not above */
  const char *arithmetic;           /* the resident passes' float + − ×: "native", "emulated" */
} Measure;

static guint64
now_ns (void)
{
  return (guint64) g_get_monotonic_time () * 1000u;
}

/* Our tokens per second: one warm-up step, then steps until min_time. */
static gboolean
bench_ours (const BenchSize  *size,
            DcBackendKind     kind,
            guint             n_threads,
            double            min_time,
            GBytes           *corpus,
            Measure          *m,
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
  g_autofree float *grads = NULL;
  DcTrainSettings settings;
  DcGptConfig config;
  DcGptModel *model;
  guint64 optimizer_ns = 0;
  gint64 start;
  double elapsed;

  dc_train_settings_init_default (&settings);
  settings.batch = size->batch;
  size_config (size, &config);
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
      /* The bench reads the model only when done: a resident step keeps the
       * weights and Adam moments on the device (only the loss leaves it). */
      dc_gpt_trainer_set_lazy_host (trainer, TRUE);
      dc_gpt_trainer_set_device (trainer, device, DC_GPT_TRAINER_OFFLOAD_MIN);
    }
  else
    *device_name = g_strdup ("cpu");

  if (!dc_gpt_trainer_step (trainer, NULL, error))
    return FALSE;
  /* The measured steps are dc_gpt_trainer_step ()'s two halves, so that
   * the optimizer's time can be told apart. */
  /* Not through dc_gpt_trainer_get_model (): that would read a lazy
   * resident state back and make the next step compare the model. */
  grads = g_new (float, dc_gpt_config_n_params (&config));
  m->steps = 0;
  vk_step = dc_gpt_trainer_get_resident_step (trainer);
  vk_pass = dc_gpt_trainer_get_resident_pass (trainer);
  *resident = vk_step == NULL ? NULL
              : vk_pass != NULL ? "forward,backward,adam" : dc_gpt_vk_step_get_resident (vk_step);
  m->arithmetic = vk_pass != NULL ? dc_gpt_vk_forward_get_arithmetic (vk_pass)
                  : vk_step != NULL ? dc_gpt_vk_step_get_arithmetic (vk_step) : NULL;
  if (vk_step != NULL)
    dc_gpt_vk_step_get_times (vk_step, &resident0);
  if (vk_pass != NULL)
    dc_gpt_vk_forward_get_times (vk_pass, &pass0);
  dc_gpt_run_get_times (dc_gpt_trainer_get_run (trainer), &times0);
  dc_parallel_get_stats (&pool0);
  start = g_get_monotonic_time ();
  do
    {
      guint64 t0;

      /* Shared on the device, the step is one call (its gradients never
       * leave the device); the optimizer's time is then the resident
       * step's own (its submission and host work). */
      if (vk_step != NULL && dc_gpt_vk_step_get_shared (vk_step))
        {
          DcGptVkStepTimes before, after;

          dc_gpt_vk_step_get_times (vk_step, &before);
          if (!dc_gpt_trainer_step (trainer, NULL, error))
            return FALSE;
          /* A failed replay hands the step back to the CPU (and frees it). */
          vk_step = dc_gpt_trainer_get_resident_step (trainer);
          if (vk_step != NULL)
            {
              dc_gpt_vk_step_get_times (vk_step, &after);
              optimizer_ns += (after.device_ns - before.device_ns)
                              + (after.host_ns - before.host_ns);
            }
          m->steps++;
          elapsed = (g_get_monotonic_time () - start) / 1e6;
          continue;
        }
      if (!dc_gpt_trainer_compute_gradients (trainer, 0, 1, grads, NULL, error))
        return FALSE;
      t0 = now_ns ();
      dc_gpt_trainer_apply_gradients (trainer, grads);
      optimizer_ns += now_ns () - t0;
      m->steps++;
      elapsed = (g_get_monotonic_time () - start) / 1e6;
    }
  while (elapsed < min_time || m->steps < 2);
  m->tokens_per_s = (double) m->steps * size->batch * size->seq / elapsed;
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
    double rest = total_ns;

    m->shares[0] = CLAMP (gemm / total_ns, 0.0, 1.0);
    m->shares[2] = CLAMP (wait / total_ns, 0.0, 1.0 - m->shares[0]);
    m->shares[1] = 1.0 - m->shares[0] - m->shares[2];
    /* The same time by pass (each with its waits): the products, each kind
     * of pass between them, the optimizer and what is left. */
    m->gemm_total_share = CLAMP ((double) (times1.gemm_ns - times0.gemm_ns) / total_ns, 0.0, 1.0);
    rest -= (double) (times1.gemm_ns - times0.gemm_ns);
    for (guint p = 0; p < DC_GPT_N_PHASES; p++)
      {
        guint64 passes = times1.phase_passes[p] - times0.phase_passes[p];

        m->phase_shares[p] = CLAMP ((double) (times1.phase_ns[p] - times0.phase_ns[p]) / total_ns,
                                    0.0, 1.0);
        m->phase_threads[p] = passes > 0
                              ? (double) (times1.phase_threads[p] - times0.phase_threads[p])
                                / (double) passes
                              : -1;
        rest -= (double) (times1.phase_ns[p] - times0.phase_ns[p]);
      }
    m->optimizer_share = CLAMP ((double) optimizer_ns / total_ns, 0.0, 1.0);
    rest -= (double) optimizer_ns;
    m->rest_share = CLAMP (rest / total_ns, 0.0, 1.0);
    /* Of the rest, the resident step's submissions (its transfers and
     * kernels, waited for) and its host copies. */
    if (vk_step != NULL)
      {
        dc_gpt_vk_step_get_times (vk_step, &resident1);
        m->resident_shares[0] = CLAMP ((resident1.device_ns - resident0.device_ns) / total_ns,
                                       0.0, 1.0);
        m->resident_shares[1] = CLAMP ((resident1.host_ns - resident0.host_ns) / total_ns,
                                       0.0, 1.0);
      }
    /* The resident forward and backward passes' submission (the weights'
     * upload, every kernel, the gradients' download) and host copies;
     * fetched again, as a failed replay hands the passes back to the CPU. */
    vk_pass = dc_gpt_trainer_get_resident_pass (trainer);
    if (vk_pass != NULL)
      {
        dc_gpt_vk_forward_get_times (vk_pass, &pass1);
        m->resident_shares[2] = CLAMP ((pass1.device_ns - pass0.device_ns) / total_ns, 0.0, 1.0);
        m->resident_shares[3] = CLAMP ((pass1.host_ns - pass0.host_ns) / total_ns, 0.0, 1.0);
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
  size_config (size, &config);
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

/* The PyTorch script's spec of a size: "W,T,B,L,H". */
static char *
torch_spec (const BenchSize *size)
{
  DcGptConfig config;

  size_config (size, &config);
  return g_strdup_printf ("%u,%u,%u,%u,%u", size->width, size->seq, size->batch,
                          config.n_layer, config.n_head);
}

/* Runs the PyTorch script on the CPU (unless !with_cpu) and on CUDA (unless
 * cpu_only or absent); fills cpu[i] and cuda[i] (< 0 when not measured). */
static void
bench_torch (const BenchSize *sizes,
             guint            n_sizes,
             guint            n_threads,
             double           min_time,
             gboolean         cpu_only,
             gboolean         with_cpu,
             double          *cpu,
             double          *cuda,
             char           **version)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL;
  g_auto(GStrv) lines = NULL;
  char min_time_text[G_ASCII_DTOSTR_BUF_SIZE];

  for (guint i = 0; i < n_sizes; i++)
    cpu[i] = cuda[i] = -1;
  g_ptr_array_add (args, g_strdup_printf ("%u", n_threads));
  g_ptr_array_add (args, g_strdup (g_ascii_dtostr (min_time_text, sizeof min_time_text,
                                                   min_time)));
  /* --no-vulkan: PyTorch stays on the CPU too. */
  if (cpu_only)
    g_ptr_array_add (args, g_strdup ("--cpu-only"));
  /* --backends vulkan: PyTorch on CUDA only. */
  if (!with_cpu)
    g_ptr_array_add (args, g_strdup ("--no-cpu"));
  for (guint i = 0; i < n_sizes; i++)
    g_ptr_array_add (args, torch_spec (&sizes[i]));
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
      for (guint i = 0; i < n_sizes; i++)
        {
          g_autofree char *want = torch_spec (&sizes[i]);

          if (g_str_equal (spec, want))
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

/* The median of n values (sorted in place); -1 when there are none. */
static double
median_of (double *v,
           guint   n)
{
  if (n == 0)
    return -1;
  for (guint i = 1; i < n; i++)
    for (guint j = i; j > 0 && v[j - 1] > v[j]; j--)
      {
        double t = v[j];

        v[j] = v[j - 1];
        v[j - 1] = t;
      }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Most rounds: each is a PyTorch run and ours for every size, about 4 ×
 * min-time; 20 rounds of 3 s are 4 minutes, longer than anyone waits for a
 * figure that 5 rounds already pin down. */
#define MAX_ROUNDS 20

/* Every round's figures of one size and backend, and the shares summed. */
typedef struct
{
  double   tps[MAX_ROUNDS];
  double   torch[MAX_ROUNDS];
  double   ratio[MAX_ROUNDS];
  guint    n, n_ratio;
  guint    steps;
  Measure  sum;                 /* shares summed over the rounds */
  char    *device;
  const char *resident;
  const char *arithmetic;       /* Measure.arithmetic of the first round */
  double   fwd_resident, fwd_cpu;
  double   torch_cuda[MAX_ROUNDS];  /* PyTorch CUDA's run of each round that had one */
  guint    n_cuda;
} Rounds;

static void
print_object (const BenchSize *size,
              DcBackendKind    kind,
              guint            threads,
              Rounds          *r,
              const char      *torch_version)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  double tps, torch_cpu, torch_cuda, ratio, lo = -1, hi = -1, tps_lo, tps_hi;
  const Measure *m = &r->sum;
  DcGptConfig config;

  tps = median_of (r->tps, r->n);
  tps_lo = r->tps[0];
  tps_hi = r->tps[r->n - 1];
  torch_cpu = median_of (r->torch, r->n_ratio);
  torch_cuda = median_of (r->torch_cuda, r->n_cuda);
  size_config (size, &config);
  ratio = median_of (r->ratio, r->n_ratio);
  if (r->n_ratio > 0)
    {
      lo = r->ratio[0];
      hi = r->ratio[r->n_ratio - 1];
    }

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "width");
  json_builder_add_int_value (builder, size->width);
  json_builder_set_member_name (builder, "seq");
  json_builder_add_int_value (builder, size->seq);
  json_builder_set_member_name (builder, "batch");
  json_builder_add_int_value (builder, size->batch);
  json_builder_set_member_name (builder, "size");
  json_builder_add_string_value (builder, size->name);
  json_builder_set_member_name (builder, "layers");
  json_builder_add_int_value (builder, config.n_layer);
  json_builder_set_member_name (builder, "heads");
  json_builder_add_int_value (builder, config.n_head);
  json_builder_set_member_name (builder, "backend");
  json_builder_add_string_value (builder, dc_backend_kind_to_string (kind));
  json_builder_set_member_name (builder, "device");
  json_builder_add_string_value (builder, r->device);
  json_builder_set_member_name (builder, "threads");
  json_builder_add_int_value (builder, threads);
  json_builder_set_member_name (builder, "steps");
  json_builder_add_int_value (builder, r->steps);
  /* Medians over the rounds, and their range. */
  json_builder_set_member_name (builder, "rounds");
  json_builder_add_int_value (builder, r->n);
  add_rate (builder, "tokens_per_s", tps);
  add_rate (builder, "tokens_per_s_min", tps_lo);
  add_rate (builder, "tokens_per_s_max", tps_hi);
  /* Shares of the calling thread's time per step (sum 1), means over the rounds. */
  add_share (builder, "gemm_share", m->shares[0] / r->n);
  add_share (builder, "other_share", m->shares[1] / r->n);
  add_share (builder, "wait_share", m->shares[2] / r->n);
  /* The same time by pass, each with its waits for the pool (sum 1), and
   * how many threads each kind of pass asked for on average. */
  json_builder_set_member_name (builder, "phase_shares");
  json_builder_begin_object (builder);
  add_share (builder, "gemm", m->gemm_total_share / r->n);
  for (guint p = 0; p < DC_GPT_N_PHASES; p++)
    add_share (builder, dc_gpt_phase_to_string (p), m->phase_shares[p] / r->n);
  add_share (builder, "optimizer", m->optimizer_share / r->n);
  add_share (builder, "rest", m->rest_share / r->n);
  json_builder_end_object (builder);
  json_builder_set_member_name (builder, "phase_threads");
  json_builder_begin_object (builder);
  for (guint p = 0; p < DC_GPT_N_PHASES; p++)
    add_share (builder, dc_gpt_phase_to_string (p),
               m->phase_threads[p] >= 0 ? m->phase_threads[p] / r->n : -1);
  json_builder_end_object (builder);
  /* What runs resident on the device, and its part of other_share. */
  json_builder_set_member_name (builder, "resident");
  if (r->resident != NULL)
    json_builder_add_string_value (builder, r->resident);
  else
    json_builder_add_null_value (builder);
  /* How the resident kernels do float + − × (docs/VERIFICATION.md, "Native
   * + − ×"): "native" or "emulated"; null when nothing is resident. */
  json_builder_set_member_name (builder, "resident_arithmetic");
  if (r->arithmetic != NULL)
    json_builder_add_string_value (builder, r->arithmetic);
  else
    json_builder_add_null_value (builder);
  add_share (builder, "resident_device_share",
             m->resident_shares[0] >= 0 ? m->resident_shares[0] / r->n : -1);
  add_share (builder, "resident_host_share",
             m->resident_shares[1] >= 0 ? m->resident_shares[1] / r->n : -1);
  /* The resident forward and backward passes (resident names "forward"):
   * their submission and host copies, of other_share. */
  add_share (builder, "resident_pass_device_share",
             m->resident_shares[2] >= 0 ? m->resident_shares[2] / r->n : -1);
  add_share (builder, "resident_pass_host_share",
             m->resident_shares[3] >= 0 ? m->resident_shares[3] / r->n : -1);
  /* --resident-forward: forward passes up to the logits, tokens/s. */
  add_rate (builder, "resident_forward_tokens_per_s", r->fwd_resident);
  add_rate (builder, "cpu_forward_tokens_per_s", r->fwd_cpu);
  /* What the resident step allocates on the device and in host-visible
   * memory (dc_gpt_vk_train_memory ()); null on the CPU. */
  {
    guint64 device_bytes = 0, host_bytes = 0;

    if (kind == DC_BACKEND_VULKAN)
      dc_gpt_vk_train_memory (&config, size->batch, &device_bytes, &host_bytes);
    add_rate (builder, "resident_device_bytes", (double) device_bytes);
    add_rate (builder, "resident_host_bytes", (double) host_bytes);
  }
  add_rate (builder, "torch_cpu_tokens_per_s", torch_cpu);
  add_rate (builder, "torch_cuda_tokens_per_s", torch_cuda);
  /* Ours (the median) over PyTorch CUDA's median: the Vulkan goal's figure. */
  add_rate (builder, "ratio_vs_torch_cuda", torch_cuda > 0 ? tps / torch_cuda : -1);
  /* Each round's ratio is ours over PyTorch's run just before it. */
  add_rate (builder, "ratio_vs_torch_cpu", ratio);
  add_rate (builder, "ratio_vs_torch_cpu_min", lo);
  add_rate (builder, "ratio_vs_torch_cpu_max", hi);
  json_builder_set_member_name (builder, "torch");
  if (torch_version != NULL)
    json_builder_add_string_value (builder, torch_version);
  else
    json_builder_add_null_value (builder);
  json_builder_end_object (builder);
  dc_cli_print_json (builder);
}

int
dc_cli_bench_train_run (const DcCliCommand  *command,
                        DcCliOptions        *options,
                        int                  argc,
                        char               **argv)
{
  int threads = 0, n_rounds = 1;
  double min_time = 3.0;
  gboolean no_torch = FALSE, no_vulkan = FALSE, resident_forward = FALSE;
  gboolean with_kind[2] = { TRUE, TRUE };
  g_autofree char *sizes_text = NULL, *backends_text = NULL;
  const GOptionEntry entries[] = {
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, N_("Threads for us and PyTorch (all cores)"),
      "N" },
    { "min-time", 0, 0, G_OPTION_ARG_DOUBLE, &min_time, N_("Seconds per measurement (3)"), "S" },
    { "rounds", 0, 0, G_OPTION_ARG_INT, &n_rounds,
      N_("Alternate PyTorch and ours N times and report medians and ranges (1)"), "N" },
    { "no-torch", 0, 0, G_OPTION_ARG_NONE, &no_torch, N_("Skip the PyTorch reference"), NULL },
    { "no-vulkan", 0, 0, G_OPTION_ARG_NONE, &no_vulkan, N_("Measure the CPU only"), NULL },
    { "resident-forward", 0, 0, G_OPTION_ARG_NONE, &resident_forward,
      N_("Also time the forward pass resident on the Vulkan device against the CPU's"), NULL },
    { "sizes", 0, 0, G_OPTION_ARG_STRING, &sizes_text,
      N_("Sizes, comma-separated: default, w128, gpt2-small or WIDTH/SEQ/BATCH[/LAYERS/HEADS] "
         "(default,w128)"), "LIST" },
    { "backends", 0, 0, G_OPTION_ARG_STRING, &backends_text,
      N_("Our backends to measure, comma-separated: cpu, vulkan (cpu,vulkan); PyTorch runs on "
         "the CPU only when cpu is named"), "LIST" },
    { NULL }
  };
  g_autoptr(GArray) size_list = NULL;
  g_autoptr(GError) sizes_error = NULL;
  g_autofree Rounds *rounds = NULL;
  const BenchSize *sizes;
  guint n_sizes;
  g_autoptr(GBytes) corpus = NULL;
  g_autofree char *torch_version = NULL;
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
  if (n_rounds < 1 || n_rounds > MAX_ROUNDS)
    return dc_cli_usage_error (command, _("--rounds must be between 1 and %d"), MAX_ROUNDS);
  size_list = parse_sizes (sizes_text != NULL ? sizes_text : "default,w128", &sizes_error);
  if (size_list == NULL)
    return dc_cli_usage_error (command, _("--sizes: %s"), sizes_error->message);
  sizes = (const BenchSize *) size_list->data;
  n_sizes = size_list->len;
  if (backends_text != NULL)
    {
      g_auto(GStrv) names = g_strsplit (backends_text, ",", -1);

      with_kind[0] = with_kind[1] = FALSE;
      for (guint i = 0; names[i] != NULL; i++)
        {
          g_strstrip (names[i]);
          if (g_str_equal (names[i], "cpu"))
            with_kind[0] = TRUE;
          else if (g_str_equal (names[i], "vulkan"))
            with_kind[1] = TRUE;
          else
            return dc_cli_usage_error (command, _("--backends: unknown backend “%s” (cpu, vulkan)"),
                                       names[i]);
        }
    }
  if (no_vulkan)
    with_kind[1] = FALSE;
  if (!with_kind[0] && !with_kind[1])
    return dc_cli_usage_error (command, _("--backends: nothing left to measure"));

  rounds = g_new0 (Rounds, (gsize) n_sizes * G_N_ELEMENTS (kinds));
  corpus = dc_corpus_dup_builtin ();
  for (int round = 0; round < n_rounds; round++)
    {
      double torch_cpu[MAX_SIZES], torch_cuda[MAX_SIZES];

      for (guint i = 0; i < n_sizes; i++)
        torch_cpu[i] = torch_cuda[i] = -1;
      /* PyTorch first in every round, then ours: the two alternate, so a
       * machine whose speed drifts moves both sides of each ratio. */
      if (!no_torch)
        bench_torch (sizes, n_sizes, threads, min_time, no_vulkan, with_kind[0], torch_cpu,
                     torch_cuda, &torch_version);

      for (guint i = 0; i < n_sizes; i++)
        for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
          {
            g_autoptr(GError) error = NULL;
            g_autofree char *device = NULL;
            Rounds *r = &rounds[i * G_N_ELEMENTS (kinds) + k];
            Measure m = { .resident_shares = { -1, -1, -1, -1 } };
            const char *resident = NULL;

            if (!with_kind[k])
              continue;
            if (!bench_ours (&sizes[i], kinds[k], threads, min_time, corpus, &m, &resident,
                             &device, &error))
              {
                g_printerr ("daisychain-cli: bench train %s: %s\n",
                            dc_backend_kind_to_string (kinds[k]), error->message);
                continue;
              }
            if (r->n == 0)
              {
                r->device = g_steal_pointer (&device);
                r->resident = resident;
                r->arithmetic = m.arithmetic;
                r->fwd_resident = r->fwd_cpu = -1;
                for (guint j = 0; j < 4; j++)
                  r->sum.resident_shares[j] = -1;
                for (guint p = 0; p < DC_GPT_N_PHASES; p++)
                  r->sum.phase_threads[p] = -1;
                if (resident_forward && kinds[k] == DC_BACKEND_VULKAN)
                  bench_resident_forward (&sizes[i], threads, min_time, &r->fwd_resident,
                                          &r->fwd_cpu);
              }
            r->tps[r->n++] = m.tokens_per_s;
            r->steps += m.steps;
            if (torch_cuda[i] > 0)
              r->torch_cuda[r->n_cuda++] = torch_cuda[i];
            if (torch_cpu[i] > 0)
              {
                r->torch[r->n_ratio] = torch_cpu[i];
                r->ratio[r->n_ratio++] = m.tokens_per_s / torch_cpu[i];
              }
            for (guint j = 0; j < 3; j++)
              r->sum.shares[j] += m.shares[j];
            for (guint j = 0; j < 4; j++)
              if (m.resident_shares[j] >= 0)
                r->sum.resident_shares[j] = MAX (r->sum.resident_shares[j], 0)
                                            + m.resident_shares[j];
            for (guint p = 0; p < DC_GPT_N_PHASES; p++)
              {
                r->sum.phase_shares[p] += m.phase_shares[p];
                if (m.phase_threads[p] >= 0)
                  r->sum.phase_threads[p] = MAX (r->sum.phase_threads[p], 0) + m.phase_threads[p];
              }
            r->sum.gemm_total_share += m.gemm_total_share;
            r->sum.optimizer_share += m.optimizer_share;
            r->sum.rest_share += m.rest_share;
          }
    }

  for (guint i = 0; i < n_sizes; i++)
    for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
      {
        Rounds *r = &rounds[i * G_N_ELEMENTS (kinds) + k];

        if (r->n == 0)
          continue;
        if (options->json)
          print_object (&sizes[i], kinds[k], threads, r, torch_version);
        else
          {
            double tps = median_of (r->tps, r->n);
            double torch_cpu = median_of (r->torch, r->n_ratio);
            double ratio = median_of (r->ratio, r->n_ratio);

            g_print ("width %3u seq %3u batch %2u  %-6s %10.0f tokens/s   torch cpu %10.0f   "
                     "ratio %.2f", sizes[i].width, sizes[i].seq, sizes[i].batch,
                     dc_backend_kind_to_string (kinds[k]), tps, torch_cpu,
                     ratio > 0 ? ratio : 0.0);
            if (r->n_ratio > 1)
              g_print (" (%.2f – %.2f over %u rounds)", r->ratio[0], r->ratio[r->n_ratio - 1],
                       r->n_ratio);
            if (kinds[k] == DC_BACKEND_VULKAN && r->n_cuda > 0)
              {
                double cuda = median_of (r->torch_cuda, r->n_cuda);

                g_print ("   torch cuda %10.0f   ratio %.2f", cuda, tps / cuda);
              }
            g_print ("\n");
          }
        g_free (r->device);
      }
  if (!options->json && torch_version != NULL)
    g_print ("PyTorch: %s\n", torch_version);
  return DC_CLI_EXIT_OK;
}
