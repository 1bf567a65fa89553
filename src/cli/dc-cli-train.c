/* dc-cli-train.c: `daisychain-cli train`, training on this device.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"
#include "model/dc-checkpoint.h"
#include "model/dc-train-data.h"
#include "data/dc-dataset.h"
#include "model/dc-trainer.h"

typedef struct
{
  int    width, seq, batch, steps, lr, threads, stop_at;
  gint64 seed;
  char  *data, *backend, *out, *resume;
} TrainArgs;

static void
print_step (DcCliOptions *options,
            guint64       step,
            float         loss,
            double        tokens_per_s,
            const char   *hash)
{
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "step");
      json_builder_set_member_name (builder, "step");
      json_builder_add_int_value (builder, step);
      json_builder_set_member_name (builder, "loss");
      json_builder_add_double_value (builder, loss);
      json_builder_set_member_name (builder, "tokens_per_s");
      json_builder_add_double_value (builder, tokens_per_s);
      json_builder_set_member_name (builder, "hash");
      json_builder_add_string_value (builder, hash);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    g_print ("step %5" G_GUINT64_FORMAT "  loss %.4f  %8.0f tokens/s  %s\n", step, loss,
             tokens_per_s, hash);
}

/* The data layer logged the message on stderr; scripts reading --json get it too. */
static void
print_data_fallback (void)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "event");
  json_builder_add_string_value (builder, "data-fallback");
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, DC_DATASET_UNREACHABLE_MESSAGE);
  json_builder_end_object (builder);
  dc_cli_print_json (builder);
}

static DcGptModel *
start_model (TrainArgs        *args,
             DcTrainSettings  *settings,
             GError          **error)
{
  DcGptModel *model;
  DcGptConfig config;

  if (args->resume != NULL)
    {
      model = dc_checkpoint_load (args->resume, settings, error);
      /* --steps extends or shortens the resumed run; the rest comes from the file. */
      if (model != NULL && args->steps > 0)
        settings->steps = args->steps;
      return model;
    }
  dc_train_settings_init_default (settings);
  if (args->batch > 0)
    settings->batch = args->batch;
  if (args->steps > 0)
    settings->steps = args->steps;
  if (args->lr > 0)
    settings->lr_x1000 = args->lr;
  settings->seed = (guint64) args->seed;
  dc_gpt_config_init_derived (&config, args->width, args->seq);
  model = dc_gpt_model_new (&config, error);
  if (model != NULL)
    dc_gpt_model_init_weights (model, settings->seed);
  return model;
}

int
dc_cli_train_run (const DcCliCommand  *command,
                  DcCliOptions        *options,
                  int                  argc,
                  char               **argv)
{
  TrainArgs args = { .width = 32, .seq = 32, .seed = 1, .threads = 0 };
  g_autofree char *data = NULL, *backend = NULL, *out = NULL, *resume = NULL;
  const GOptionEntry entries[] = {
    { "width", 0, 0, G_OPTION_ARG_INT, &args.width, N_("Model width, 16–128 (32)"), "N" },
    { "seq", 0, 0, G_OPTION_ARG_INT, &args.seq, N_("Sequence length, 16–128 (32)"), "N" },
    { "batch", 0, 0, G_OPTION_ARG_INT, &args.batch, N_("Batch per device, 2–32 (8)"), "N" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &args.steps, N_("Steps of the run, 100–10000 (300)"), "N" },
    { "lr", 0, 0, G_OPTION_ARG_INT, &args.lr, N_("Learning rate ×1000, 5–50 (10)"), "N" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &args.seed, N_("Seed of weights and batches (1)"), "N" },
    { "data", 0, 0, G_OPTION_ARG_STRING, &data,
      N_("Training text: builtin, a Hugging Face dataset id, or a file (builtin)"), "SOURCE" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
      N_("Where large products run: cpu, cpu-scalar or vulkan (cpu)"), "NAME" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &args.threads,
      N_("GEMM threads; results do not depend on it (all cores)"), "N" },
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, N_("Save a checkpoint here at the end"), "FILE" },
    { "resume", 0, 0, G_OPTION_ARG_FILENAME, &resume, N_("Continue from a checkpoint"), "FILE" },
    { "stop-at", 0, 0, G_OPTION_ARG_INT, &args.stop_at,
      N_("Stop (and save) after this step, before the run's end"), "STEP" },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) corpus = NULL;
  g_autoptr(DcTrainer) trainer = NULL;
  DcGptModel *model;
  DcTrainSettings settings;
  DcBackendKind kind = DC_BACKEND_CPU;
  DcGemmBackend *device = NULL;
  guint64 stop;
  float loss = 0.0f;
  g_autofree char *hash = NULL;
  gboolean used_fallback = FALSE;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (backend != NULL && !dc_backend_kind_from_string (backend, &kind))
    return dc_cli_usage_error (command, _("unknown backend “%s” (cpu, cpu-scalar, vulkan)"),
                               backend);
  args.data = data;
  args.resume = resume;
  if (args.threads <= 0)
    args.threads = g_get_num_processors ();

  model = start_model (&args, &settings, &error);
  if (model == NULL)
    return dc_cli_fail (options, error);
  /* After the model: a resumed run's seed orders the dataset's row groups. */
  corpus = dc_train_data_load (data != NULL ? data : "builtin", settings.seed, &used_fallback,
                               NULL, &error);
  if (corpus == NULL)
    {
      dc_gpt_model_free (model);
      return dc_cli_fail (options, error);
    }
  if (used_fallback && options->json)
    print_data_fallback ();
  trainer = dc_trainer_new (model, &settings, corpus, DC_GPT_PRECISION_INT8, args.threads,
                            &error);
  if (trainer == NULL)
    return dc_cli_fail (options, error);
  model = dc_trainer_get_model (trainer);
  /* The CPU backend is always there for small products; another one takes the
   * large products (all of them for cpu-scalar, which exists for checking). */
  if (kind != DC_BACKEND_CPU)
    {
      device = dc_gemm_backend_new (kind, &error);
      if (device == NULL)
        return dc_cli_fail (options, error);
      g_printerr ("daisychain-cli: products of ≥ %" G_GUINT64_FORMAT " multiply-adds on %s (%s, %s)\n",
                  kind == DC_BACKEND_CPU_SCALAR ? (guint64) 0 : DC_TRAINER_OFFLOAD_MIN,
                  dc_backend_kind_to_string (dc_gemm_backend_get_kind (device)),
                  dc_gemm_backend_get_device_name (device),
                  dc_gemm_backend_get_kernel_name (device));
      dc_trainer_set_device (trainer, device,
                             kind == DC_BACKEND_CPU_SCALAR ? 0 : DC_TRAINER_OFFLOAD_MIN);
    }
  stop = args.stop_at > 0 ? MIN ((guint64) args.stop_at, settings.steps) : settings.steps;

  while (model->step < stop)
    {
      gint64 start = g_get_monotonic_time ();
      double seconds;

      if (!dc_trainer_step (trainer, &loss, &error))
        return dc_cli_fail (options, error);
      seconds = MAX (1e-6, (g_get_monotonic_time () - start) / 1e6);
      g_free (hash);
      hash = dc_gpt_model_dup_hash (model);
      print_step (options, model->step, loss,
                  (double) settings.batch * model->config.seq / seconds, hash);
    }
  if (out != NULL && !dc_checkpoint_save (model, &settings, out, &error))
    return dc_cli_fail (options, error);

  if (hash == NULL)
    hash = dc_gpt_model_dup_hash (model);
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "done");
      json_builder_set_member_name (builder, "step");
      json_builder_add_int_value (builder, model->step);
      json_builder_set_member_name (builder, "hash");
      json_builder_add_string_value (builder, hash);
      if (out != NULL)
        {
          json_builder_set_member_name (builder, "checkpoint");
          json_builder_add_string_value (builder, out);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else if (out != NULL)
    g_print (_("Saved %s at step %" G_GUINT64_FORMAT "\n"), out, model->step);
  return DC_CLI_EXIT_OK;
}
