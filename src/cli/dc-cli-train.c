/* dc-cli-train.c: `daisychain-cli train`, training on this device.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

/* PRId64 and PRIu64 in translatable strings: xgettext knows them, not
 * GLib's G_GINT64_FORMAT (the msgid would end at the "%"). */
#include <inttypes.h>
#include <glib/gi18n.h>

#include "dc-cli.h"
#include "dc-cli-hub-token.h"
#include "dc-cli-train-group.h"
#include "dc-context.h"
#include "data/dc-dataset.h"
#include "model/dc-checkpoint.h"
#include "model/dc-gpt-trainer.h"
#include "model/dc-gpt-vk-step.h"
#include "train/dc-train-plan.h"

typedef struct
{
  int      width, seq, batch, steps, lr, threads, stop_at, simulate_peers, min_peers;
  int      layers, heads;
  gboolean advanced, dry_run;
  gint64   seed;
} TrainArgs;

static void
print_step (DcCliOptions *options,
            guint64       step,
            float         loss,
            double        tokens_per_s,
            const char   *hash,
            guint         roster)
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
      json_builder_set_member_name (builder, "roster");
      json_builder_add_int_value (builder, roster);
      json_builder_set_member_name (builder, "cpu_ms");
      json_builder_add_double_value (builder, dc_cli_process_cpu_ms ());
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

/* --dry-run: the model, its settings and the memory the run needs. */
static void
print_plan (DcCliOptions      *options,
            const DcTrainPlan *plan)
{
  const DcGptMemory *m = &plan->memory;
  gboolean fits = plan->available == 0 || m->total_bytes <= plan->available;
  guint64 vk_device = plan->resident_device_bytes, vk_host = plan->resident_host_bytes;

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();
      struct { const char *name; guint64 value; } fields[] = {
        { "width", plan->config.width }, { "seq", plan->config.seq },
        { "layers", plan->config.n_layer }, { "heads", plan->config.n_head },
        { "batch", plan->settings.batch }, { "steps", plan->settings.steps },
        { "threads", plan->n_threads }, { "ranks", plan->n_ranks },
        { "params", m->n_params }, { "params_bytes", m->params_bytes },
        { "grads_bytes", m->grads_bytes }, { "arena_bytes", m->arena_bytes },
        { "scratch_bytes", m->scratch_bytes }, { "memory_bytes", m->total_bytes },
        { "available_bytes", plan->available },
        { "resident_device_bytes", vk_device }, { "resident_host_bytes", vk_host },
        { "resident_max_batch", plan->resident_max_batch },
      };

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "plan");
      for (gsize i = 0; i < G_N_ELEMENTS (fields); i++)
        {
          json_builder_set_member_name (builder, fields[i].name);
          json_builder_add_int_value (builder, (gint64) fields[i].value);
        }
      json_builder_set_member_name (builder, "advanced");
      json_builder_add_boolean_value (builder, !dc_gpt_config_in_seed_range (&plan->config));
      json_builder_set_member_name (builder, "fits");
      json_builder_add_boolean_value (builder, fits);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_autofree char *need = g_format_size (m->total_bytes);
      g_autofree char *have = g_format_size (plan->available);

      g_print (_("width %u, sequence %u, %u layers, %u heads: %" PRIu64
                 " parameters\n"), plan->config.width, plan->config.seq, plan->config.n_layer,
               plan->config.n_head, m->n_params);
      g_print (_("memory at batch %u: %s (available: %s)%s\n"), plan->settings.batch, need,
               plan->available > 0 ? have : _("unknown"), fits ? "" : _(" — does not fit"));
      {
        g_autofree char *device = g_format_size (vk_device);
        g_autofree char *host = g_format_size (vk_host);

        g_print (_("resident on a Vulkan device: %s of device memory, %s host-visible\n"),
                 device, host);
        if (plan->settings.batch > plan->resident_max_batch)
          {
            if (plan->resident_max_batch == 0)
              g_print (_("  at any batch only the Adam step: the forward and backward passes' "
                         "buffers exceed the 4 GiB one storage binding holds\n"));
            else
              g_print (_("  at batch %u only the Adam step: the forward and backward passes' "
                         "buffers exceed the 4 GiB one storage binding holds (batch %u or "
                         "less keeps them on the GPU)\n"),
                       plan->settings.batch, plan->resident_max_batch);
          }
      }
    }
}

int
dc_cli_train_run (const DcCliCommand  *command,
                  DcCliOptions        *options,
                  int                  argc,
                  char               **argv)
{
  /* G_MININT64: no --seed (alone that is seed 1; a group's starter draws one). */
  TrainArgs args = { .width = 32, .seq = 32, .seed = G_MININT64, .threads = 0, .min_peers = 2 };
  g_autofree char *data = NULL, *backend = NULL, *out = NULL, *resume = NULL;
  g_autofree char *vulkan_device = NULL;
  g_autofree char *room = NULL, *signal_url = NULL, *name = NULL, *approve = NULL;
  g_autofree char *test_probe_hash = NULL, *load_at = NULL, *gradient_wire = NULL;
  g_autofree char *token_file = NULL;
  g_auto(GStrv) ice_addresses = NULL;
  const GOptionEntry entries[] = {
    { "width", 0, 0, G_OPTION_ARG_INT, &args.width,
      N_("Model width, 16–128, with --advanced up to 768 (32)"), "N" },
    { "seq", 0, 0, G_OPTION_ARG_INT, &args.seq,
      N_("Sequence length, 16–128, with --advanced up to 1024 (32)"), "N" },
    { "advanced", 0, 0, G_OPTION_ARG_NONE, &args.advanced,
      N_("Allow the Advanced sizes: width up to 768, sequence up to 1024 (in a group: when "
         "every device announced the memory they need)"),
      NULL },
    { "layers", 0, 0, G_OPTION_ARG_INT, &args.layers,
      N_("Layers, 1–12 (from the width: 2 up to 32, 3 up to 64, else 4)"), "N" },
    { "heads", 0, 0, G_OPTION_ARG_INT, &args.heads,
      N_("Attention heads, dividing the width (width / 16)"), "N" },
    { "dry-run", 0, 0, G_OPTION_ARG_NONE, &args.dry_run,
      N_("Print the plan and the memory it needs, then exit without training"), NULL },
    { "batch", 0, 0, G_OPTION_ARG_INT, &args.batch, N_("Batch per device, 2–32 (8)"), "N" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &args.steps, N_("Steps of the run, 100–10000 (300)"), "N" },
    { "lr", 0, 0, G_OPTION_ARG_INT, &args.lr, N_("Learning rate ×1000, 5–50 (10)"), "N" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &args.seed, N_("Seed of weights and batches (1)"), "N" },
    { "data", 0, 0, G_OPTION_ARG_STRING, &data,
      N_("Training text: builtin, a Hugging Face dataset id, or a file (builtin)"), "SOURCE" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
      N_("Where large products run: cpu, cpu-scalar or vulkan (cpu)"), "NAME" },
    { "vulkan-device", 0, 0, G_OPTION_ARG_STRING, &vulkan_device,
      N_("The Vulkan device, by the id “daisychain-cli info” shows (implies --backend vulkan; "
         "default: the best device)"), "ID" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &args.threads,
      N_("GEMM threads; results do not depend on it (all cores)"), "N" },
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, N_("Save a checkpoint here at the end"), "FILE" },
    { "resume", 0, 0, G_OPTION_ARG_FILENAME, &resume, N_("Continue from a checkpoint"), "FILE" },
    { "stop-at", 0, 0, G_OPTION_ARG_INT, &args.stop_at,
      N_("Stop (and save) after this step, before the run's end"), "STEP" },
    { "simulate-peers", 0, 0, G_OPTION_ARG_INT, &args.simulate_peers,
      N_("Train as a group of N devices, simulated in this process (1)"), "N" },
    { "gradient-wire", 0, 0, G_OPTION_ARG_STRING, &gradient_wire,
      N_("A group's gradients on the wire: f32, bf16 (half the bytes) or int8 (about a quarter, "
         "for slow networks), rounded the same way on every device; the starter's choice "
         "holds (f32)"), "f32|bf16|int8" },
    { "room", 0, 0, G_OPTION_ARG_STRING, &room,
      N_("Train with the group in this room (with --signal and no --room: generate one)"),
      N_("CODE") },
    { "signal", 0, 0, G_OPTION_ARG_STRING, &signal_url,
      N_("Signaling service URL (ws:// or wss://…/signal) of the group"), N_("URL") },
    { "name", 0, 0, G_OPTION_ARG_STRING, &name, N_("This device's name (default: host name)"),
      N_("NAME") },
    { "approve", 0, 0, G_OPTION_ARG_STRING, &approve,
      N_("As the room's host: admit all, none, or ask on stdin (default: ask)"),
      N_("all|none|ask") },
    { "min-peers", 0, 0, G_OPTION_ARG_INT, &args.min_peers,
      N_("The room's host starts the run once this many devices, itself included, are "
         "connected (2)"), "K" },
    { "ice-address", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ice_addresses,
      N_("Use only this local address for ICE (repeatable)"), N_("ADDRESS") },
    { "load-at", 0, 0, G_OPTION_ARG_STRING, &load_at,
      N_("With --room: after this device's step STEP, load the checkpoint FILE into the "
         "group's run (every device continues from it)"), N_("STEP:FILE") },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Read the Hugging Face token for a gated dataset from FILE (else HF_TOKEN), sent "
         "only after a 401/403"), "FILE" },
    { "test-probe-hash", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &test_probe_hash,
      N_("Test: claim this probe hash in the hello"), N_("HEX") },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcContext) context = NULL;
  g_autoptr(DcTrainPlan) plan = NULL;
  g_autoptr(DcTrainSession) session = NULL;
  DcTrainingRequest request = { 0 };
  DcTrainSettings settings;
  DcGptModel *model = NULL;
  DcGptTrainer *trainer = NULL;
  DcBackendKind kind = DC_BACKEND_CPU;
  float loss = 0.0f;
  g_autofree char *hash = NULL;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (backend != NULL && !dc_backend_kind_from_string (backend, &kind))
    return dc_cli_usage_error (command, _("unknown backend “%s” (cpu, cpu-scalar, vulkan)"),
                               backend);
  if (vulkan_device != NULL && backend == NULL)
    kind = DC_BACKEND_VULKAN;
  else if (vulkan_device != NULL && kind != DC_BACKEND_VULKAN)
    return dc_cli_usage_error (command, _("--vulkan-device needs --backend vulkan"));
  if (args.simulate_peers < 0 || args.simulate_peers > DC_TRAIN_SIMULATE_PEERS_MAX)
    return dc_cli_usage_error (command, _("--simulate-peers takes 1 to %u devices"),
                               DC_TRAIN_SIMULATE_PEERS_MAX);

  /* As before: batch, steps and learning rate ≤ 0 mean the default; a
   * negative width or sequence wraps to a huge one that the ranges refuse. */
  request.width = (guint) args.width;
  request.seq = (guint) args.seq;
  request.batch = (guint) MAX (args.batch, 0);
  request.steps = (guint) MAX (args.steps, 0);
  request.lr_x1000 = (guint) MAX (args.lr, 0);
  request.seed = args.seed == G_MININT64 ? 1 : (guint64) args.seed;
  request.n_threads = (guint) MAX (args.threads, 0);
  request.data = data;
  request.stop_at = (guint) MAX (args.stop_at, 0);
  request.simulate_peers = (guint) args.simulate_peers;
  request.advanced = args.advanced;
  /* Negative values wrap to huge ones that the ranges refuse. */
  request.n_layer = (guint) args.layers;
  request.n_head = (guint) args.heads;
  if (gradient_wire != NULL
      && !dc_train_wire_from_string (gradient_wire, &request.gradient_wire))
    return dc_cli_usage_error (command, _("--gradient-wire takes f32, bf16 or int8, not “%s”"),
                               gradient_wire);
  if (gradient_wire != NULL && room == NULL && signal_url == NULL && args.simulate_peers == 0)
    return dc_cli_usage_error (command, _("--gradient-wire is for a group: with --room or "
                                          "--simulate-peers"));

  if (room != NULL || signal_url != NULL)
    {
      DcCliTrainGroupArgs group = { 0 };
      g_autoptr(DcGptModel) resumed = NULL;
      g_autoptr(DcGptModel) loaded = NULL;
      int status;

      if (signal_url == NULL)
        return dc_cli_usage_error (command, _("--room needs --signal"));

      if (args.dry_run)
        return dc_cli_usage_error (command,
                                   _("--dry-run is for a run on this device alone, not with "
                                     "--room"));
      if (out != NULL || args.simulate_peers > 0)
        return dc_cli_usage_error (command,
                                   _("--out and --simulate-peers are for a run on "
                                     "this device alone, not with --room"));
      if (args.min_peers < 1 || args.min_peers > DC_MESH_ROSTER_MAX)
        return dc_cli_usage_error (command, _("--min-peers takes 1 to %u devices"),
                                   DC_MESH_ROSTER_MAX);
      if (name != NULL && !g_utf8_validate (name, -1, NULL))
        return dc_cli_usage_error (command, _("--name must be UTF-8 text"));
      if (data != NULL && !g_str_equal (data, "builtin") && g_file_test (data, G_FILE_TEST_EXISTS))
        return dc_cli_usage_error (command, _("a group cannot share the file “%s”: train "
                                              "together on builtin or a Hugging Face dataset"),
                                   data);
      if (approve == NULL || g_str_equal (approve, "ask"))
        group.approve = DC_MESH_APPROVE_ASK;
      else if (g_str_equal (approve, "all"))
        group.approve = DC_MESH_APPROVE_ALL;
      else if (g_str_equal (approve, "none"))
        group.approve = DC_MESH_APPROVE_NONE;
      else
        return dc_cli_usage_error (command, _("--approve takes all, none or ask"));
      if (load_at != NULL)
        {
          char *end = NULL;
          guint64 step = g_ascii_strtoull (load_at, &end, 10);

          if (end == load_at || *end != ':' || end[1] == '\0' || step == 0 || step > G_MAXUINT)
            return dc_cli_usage_error (command, _("--load-at takes STEP:FILE, STEP ≥ 1"));
          group.load_at = (guint) step;
          loaded = dc_checkpoint_load (end + 1, &group.load_settings, &error);
          if (loaded == NULL)
            return dc_cli_fail (options, error);
          group.load = loaded;
        }
      /* The starter's values are checked here; a follower's come in its
       * config. A checkpoint to continue brings its own size and settings. */
      if (resume != NULL)
        {
          resumed = dc_checkpoint_load (resume, &group.resume_settings, &error);
          if (resumed == NULL)
            return dc_cli_fail (options, error);
          group.resume = resumed;
        }
      else
        {
          plan = dc_train_plan_new (&request, NULL, NULL, &error);
          if (plan == NULL)
            return dc_cli_fail (options, error);
        }
      context = dc_context_new_for_device (kind, vulkan_device, &error);
      if (context == NULL)
        return dc_cli_fail (options, error);
      dc_cli_hub_token_attach (dc_context_get_hf_client (context), token_file);
      group.room = room;
      group.signal_url = signal_url;
      group.name = name;
      group.min_peers = (guint) args.min_peers;
      group.ice_addresses = ice_addresses;
      group.test_probe_hash = test_probe_hash;
      status = dc_cli_train_group_run (options, context, &request, args.seed != G_MININT64,
                                       &group);
      return status;
    }

  if (resume != NULL)
    {
      model = dc_checkpoint_load (resume, &settings, &error);
      if (model == NULL)
        return dc_cli_fail (options, error);
    }
  plan = dc_train_plan_new (&request, model, model != NULL ? &settings : NULL, &error);
  if (plan == NULL)
    {
      g_clear_pointer (&model, dc_gpt_model_free);
      return dc_cli_fail (options, error);
    }
  if (args.dry_run)
    {
      print_plan (options, plan);
      return DC_CLI_EXIT_OK;
    }
  if (!dc_train_plan_check_memory (plan, &error))
    return dc_cli_fail (options, error);

  /* This process's context: the backend its training uses (it outlives the
   * session, which borrows the backend: declared first, freed last). */
  context = dc_context_new_for_device (kind, vulkan_device, &error);
  if (context == NULL)
    return dc_cli_fail (options, error);
  dc_cli_hub_token_attach (dc_context_get_hf_client (context), token_file);
  if (kind != DC_BACKEND_CPU)
    g_printerr ("daisychain-cli: products of ≥ %" G_GUINT64_FORMAT " multiply-adds on %s (%s, %s)\n",
                dc_context_get_offload_min (context),
                dc_backend_kind_to_string (dc_context_get_backend_kind (context)),
                dc_context_get_device_name (context),
                dc_gemm_backend_get_kernel_name (dc_context_get_backend (context)));
  dc_train_plan_set_context (plan, context);

  session = dc_train_plan_prepare (plan, NULL, &error);
  if (session == NULL)
    return dc_cli_fail (options, error);
  if (dc_train_session_used_fallback (session) && options->json)
    print_data_fallback ();
  settings = plan->settings;
  /* The resident step (a Vulkan backend whose gates pass) keeps the state
   * on the device: per step only the loss and the hash's piece digests
   * leave it; the model is read back for the checkpoint. The model's
   * pointer stays valid; its step counter is always the host's. */
  trainer = dc_train_session_get_trainer (session);
  dc_gpt_trainer_set_lazy_host (trainer, TRUE);
  model = dc_train_session_get_model (session);

  while (model->step < plan->stop)
    {
      gint64 start = g_get_monotonic_time ();
      double seconds;

      if (!dc_train_session_step (session, &loss, &error))
        return dc_cli_fail (options, error);
      seconds = MAX (1e-6, (g_get_monotonic_time () - start) / 1e6);
      g_free (hash);
      hash = NULL;
      dc_gpt_trainer_dup_hashes (trainer, &hash, NULL);
      print_step (options, model->step, loss,
                  (double) plan->n_ranks * settings.batch * model->config.seq / seconds, hash,
                  plan->n_ranks);
    }
  if (out != NULL
      && !dc_checkpoint_save (dc_train_session_get_model (session), &settings, out, &error))
    return dc_cli_fail (options, error);

  if (hash == NULL)
    dc_gpt_trainer_dup_hashes (trainer, &hash, NULL);
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
      if (dc_gpt_trainer_get_resident_step (trainer) != NULL)
        {
          DcGptVkStepTimes times;

          /* What crossed between host and device (docs/CLI.md). */
          dc_gpt_vk_step_get_times (dc_gpt_trainer_get_resident_step (trainer), &times);
          json_builder_set_member_name (builder, "resident");
          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "steps");
          json_builder_add_int_value (builder, (gint64) times.steps);
          json_builder_set_member_name (builder, "state_downloads");
          json_builder_add_int_value (builder, (gint64) times.state_downloads);
          json_builder_set_member_name (builder, "weight_downloads");
          json_builder_add_int_value (builder, (gint64) times.weight_downloads);
          json_builder_set_member_name (builder, "uploads");
          json_builder_add_int_value (builder, (gint64) times.uploads);
          json_builder_set_member_name (builder, "device_hashes");
          json_builder_add_int_value (builder, (gint64) times.hashes);
          json_builder_end_object (builder);
        }
      if (out != NULL)
        {
          json_builder_set_member_name (builder, "checkpoint");
          json_builder_add_string_value (builder, out);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else if (out != NULL)
    g_print (_("Saved %s at step %" PRIu64 "\n"), out, model->step);
  return DC_CLI_EXIT_OK;
}
