/* dc-cli-train-group.c: `daisychain-cli train --room …`, training with a group.
 *
 * Joins like `join` does (DcGroup), then hands the run to the training
 * layer's group coordinator (DcTrainGroup) and prints its events.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <stdio.h>
#include <glib/gi18n.h>
#include <glib-unix.h>

#include "dc-cli.h"
#include "dc-cli-answers.h"
#include "dc-cli-train-group.h"
#include "engine/dc-parallel.h"
#include "mesh/dc-identity.h"
#include "mesh/dc-mesh.h"
#include "mesh/dc-room.h"
#include "train/dc-train-group.h"

typedef struct
{
  DcCliOptions *options;
  DcGroup      *group;
  DcTrainGroup *train;
  GMainLoop    *loop;
  DcCliAnswers  answers;        /* --approve ask */
  int           exit_status;
  gboolean      stopped;
  gboolean      leaving;
  const DcCliTrainGroupArgs *args;
  gboolean      loaded;         /* --load-at done */
} State;

static void print_pairs (DcCliOptions *options, const char * const *pairs);

static void
approval_requested_cb (DcGroup    *group,
                       const char *id,
                       const char *name,
                       const char *fingerprint,
                       const char *address,
                       const char *via,
                       gpointer    user_data)
{
  State *state = user_data;
  g_autofree char *short_form = dc_identity_short_fingerprint (fingerprint);
  const char *pairs[] = { "event", "request-details", "peer", name, "fingerprint", fingerprint,
                          "short", short_form, "address", address, "via", via, NULL };

  if (state->options->json)
    print_pairs (state->options, pairs);
  else
    {
      g_print (_("“%s” (certificate %s, address %s) asks to join. Type accept or decline: "),
               name, short_form != NULL ? short_form : _("unknown"),
               *address != '\0' ? address : _("unknown"));
      fflush (stdout);
    }
  dc_cli_answers_ask (&state->answers, id);
}

static void
print_pairs (DcCliOptions       *options,
             const char * const *pairs)
{
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      for (guint i = 0; pairs[i] != NULL; i += 2)
        if (pairs[i + 1] != NULL)
          {
            json_builder_set_member_name (builder, pairs[i]);
            json_builder_add_string_value (builder, pairs[i + 1]);
          }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("%s", pairs[1]);
      for (guint i = 2; pairs[i] != NULL; i += 2)
        if (pairs[i + 1] != NULL)
          g_print ("%s%s", i == 2 ? ": " : " ", pairs[i + 1]);
      g_print ("\n");
      fflush (stdout);
    }
}

static gboolean
quit_cb (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

/* The longest a device that stops waits for its peers to have read what
 * it sent them (dc_mesh_flush ()). */
#define LEAVE_FLUSH_MS 3000

static void
flushed_cb (gpointer user_data)
{
  State *state = user_data;

  dc_group_leave (state->group);
  /* Let the byes leave before the process ends. */
  g_timeout_add (DC_GROUP_LEAVE_GRACE_MS, quit_cb, state->loop);
}

/* Before the byes, every peer reads what this device sent it: a device
 * that stops on the sync guard leaves its step report to the others, who
 * otherwise, on a loaded machine, could see it leave first and train on
 * without it (test-train-group /sync-guard, 2026-12-03). */
static void
leave (State *state)
{
  DcMesh *mesh = dc_group_get_mesh (state->group);

  if (state->leaving)
    return;
  state->leaving = TRUE;
  if (mesh != NULL)
    dc_mesh_flush (mesh, LEAVE_FLUSH_MS, flushed_cb, state);
  else
    flushed_cb (state);
}

static void
group_event_cb (DcGroup    *group,
                const char *event,
                const char *peer,
                guint       n_peers,
                const char *reason,
                gpointer    user_data)
{
  State *state = user_data;

  /* Slow sending and renewals come as the training group's notice
   * (notice_cb ()), with their line as the message. */
  if (g_str_equal (event, "discovered") || g_str_equal (event, "identity")
      || g_str_equal (event, "announcing") || g_str_equal (event, "slow-sending")
      || g_str_equal (event, "sending-recovered") || g_str_equal (event, "renewing")
      || g_str_equal (event, "renewed") || g_str_equal (event, "renewal-failed"))
    return;
  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, event);
      if (peer != NULL)
        {
          json_builder_set_member_name (builder, "peer");
          json_builder_add_string_value (builder, peer);
        }
      json_builder_set_member_name (builder, "peers");
      json_builder_add_int_value (builder, n_peers);
      if (reason != NULL)
        {
          json_builder_set_member_name (builder, "reason");
          json_builder_add_string_value (builder, reason);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      const char *pairs[] = { "event", event, "peer", peer, "reason", reason, NULL };

      print_pairs (state->options, pairs);
    }
}

static void
failed_cb (DcGroup      *group,
           const GError *error,
           gpointer      user_data)
{
  State *state = user_data;

  if (state->stopped)
    return;
  state->exit_status = dc_cli_fail (state->options, error);
  state->stopped = TRUE;
  dc_train_group_stop (state->train);
  g_main_loop_quit (state->loop);
}

static void
notice_cb (DcTrainGroup *train,
           const char   *kind,
           const char   *peer,
           const char   *text,
           gpointer      user_data)
{
  State *state = user_data;
  const char *pairs[] = { "event", kind, "peer", peer, "message", text, NULL };

  if (state->options->json)
    print_pairs (state->options, pairs);
  else
    {
      g_print ("%s\n", text);
      fflush (stdout);
    }
}

static void
step_cb (DcTrainGroup       *train,
         guint64             step,
         double              loss,
         double              tokens_per_s,
         const char         *hash,
         const char * const *members,
         gpointer            user_data)
{
  State *state = user_data;
  static const char * const time_names[] = { "compute_ms", "send_ms", "wait_ms", "combine_ms" };
  guint64 times[4];

  if (state->args->load != NULL && !state->loaded && step == state->args->load_at)
    {
      g_autoptr(GError) error = NULL;

      /* Once: after the switch the run counts from the checkpoint's step. */
      state->loaded = TRUE;
      if (!dc_train_group_load_checkpoint (train, state->args->load,
                                           &state->args->load_settings, &error))
        {
          const char *pairs[] = { "event", "checkpoint-refused", "message", error->message, NULL };

          if (state->options->json)
            print_pairs (state->options, pairs);
          else
            g_printerr ("%s\n", error->message);
        }
    }

  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "step");
      json_builder_set_member_name (builder, "step");
      json_builder_add_int_value (builder, step);
      json_builder_set_member_name (builder, "loss");
      json_builder_add_double_value (builder, (float) loss);
      json_builder_set_member_name (builder, "tokens_per_s");
      json_builder_add_double_value (builder, tokens_per_s);
      json_builder_set_member_name (builder, "hash");
      json_builder_add_string_value (builder, hash);
      /* As --simulate-peers: how many devices took part; "members" names them. */
      json_builder_set_member_name (builder, "roster");
      json_builder_add_int_value (builder, g_strv_length ((char **) members));
      json_builder_set_member_name (builder, "members");
      json_builder_begin_array (builder);
      for (guint i = 0; members[i] != NULL; i++)
        json_builder_add_string_value (builder, members[i]);
      json_builder_end_array (builder);
      /* The process's CPU so far, all threads (bench group: a step's). */
      json_builder_set_member_name (builder, "cpu_ms");
      json_builder_add_double_value (builder, dc_cli_process_cpu_ms ());
      /* Where this device's step went (bench group reads these). */
      if (dc_train_group_get_step_times (train, &times[0], &times[1], &times[2], &times[3]))
        for (guint i = 0; i < G_N_ELEMENTS (times); i++)
          {
            json_builder_set_member_name (builder, time_names[i]);
            json_builder_add_double_value (builder, times[i] / 1000.0);
          }
      /* Finer: the exchange's phases, and whether the gradient was
       * computed ahead (before the step began). */
      {
        DcTrainGroupPhases phases;
        gboolean ahead;

        if (dc_train_group_get_step_phases (train, &phases, &ahead))
          {
            const struct { const char *name; gint64 us; } fields[] = {
              { "ahead_ms", phases.ahead_us },
              { "contrib_wait_ms", phases.contrib_wait_us },
              { "sum_ms", phases.sum_us },
              { "gather_wait_ms", phases.gather_wait_us },
              { "adam_ms", phases.adam_us },
              { "hash_ms", phases.hash_us },
              { "barrier_ms", phases.barrier_us },
              { "audit_paused_ms", phases.audit_paused_us },
              { "ahead_paused_ms", phases.ahead_paused_us },
            };

            for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
              {
                json_builder_set_member_name (builder, fields[i].name);
                json_builder_add_double_value (builder, fields[i].us / 1000.0);
              }
            {
              /* Counts, and when (µs of the host's monotonic clock: bench
               * group's critical path). */
              const struct { const char *name; gint64 value; } ints[] = {
                { "tail_values", (gint64) phases.tail_values },
                { "stream_chunks", phases.stream_chunks },
                { "stream_early", phases.stream_early },
                { "stream_pieces", phases.stream_pieces },
                { "gradient_began_us", phases.gradient_began_at },
                { "gradient_done_us", phases.gradient_done_at },
                { "gathered_us", phases.gathered_at },
                { "stepped_us", phases.stepped_at },
              };

              for (guint i = 0; i < G_N_ELEMENTS (ints); i++)
                {
                  json_builder_set_member_name (builder, ints[i].name);
                  json_builder_add_int_value (builder, ints[i].value);
                }
            }
            json_builder_set_member_name (builder, "computed_ahead");
            json_builder_add_boolean_value (builder, ahead);
            json_builder_set_member_name (builder, "audit_beside");
            json_builder_add_int_value (builder, phases.audit_beside);
            if (phases.audit_priority >= 0)
              {
                json_builder_set_member_name (builder, "audit_priority");
                json_builder_add_string_value (
                  builder, dc_parallel_priority_to_string (phases.audit_priority));
              }
          }
      }
      /* Beside the step (not of compute_ms): an audit's recomputation of
       * another rank's gradient of the step before. */
      if (dc_train_group_get_audit_time (train, &times[0]))
        {
          json_builder_set_member_name (builder, "audit_ms");
          json_builder_add_double_value (builder, times[0] / 1000.0);
        }
      /* Since the run began: bench group's bytes a device sends a step. */
      json_builder_set_member_name (builder, "sent_bytes");
      json_builder_add_int_value (builder, (gint64) dc_train_group_get_sent_bytes (train));
      /* Slow sending to its peers since the run began (docs/ARCHITECTURE.md,
       * "Slow sending"): bench group reports its growth. */
      {
        guint slow_episodes;
        double slow_ms;

        dc_train_group_get_slow_sending (train, &slow_episodes, &slow_ms);
        json_builder_set_member_name (builder, "slow_send_episodes");
        json_builder_add_int_value (builder, slow_episodes);
        json_builder_set_member_name (builder, "slow_send_ms");
        json_builder_add_double_value (builder, slow_ms);
        /* Connections a new one replaced (the mesh's renewal). */
        json_builder_set_member_name (builder, "renewals");
        json_builder_add_int_value (builder, dc_train_group_get_renewals (train));
      }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_autofree char *names = g_strjoinv (", ", (char **) members);

      g_print ("step %5" G_GUINT64_FORMAT "  loss %.4f  %8.0f tokens/s  %s  [%s]\n", step,
               (float) loss, tokens_per_s, hash, names);
      fflush (stdout);
    }
}

static void
finished_cb (DcTrainGroup *train,
             const GError *error,
             gpointer      user_data)
{
  State *state = user_data;
  DcGptModel *model = dc_train_group_get_model (train);

  if (error != NULL)
    {
      if (!state->stopped)
        state->exit_status = dc_cli_fail (state->options, error);
      state->stopped = TRUE;
    }
  else if (model != NULL)
    {
      g_autofree char *hash = dc_gpt_model_dup_hash (model);

      if (state->options->json)
        {
          g_autoptr(JsonBuilder) builder = json_builder_new ();

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "event");
          json_builder_add_string_value (builder, "done");
          json_builder_set_member_name (builder, "step");
          json_builder_add_int_value (builder, model->step);
          json_builder_set_member_name (builder, "hash");
          json_builder_add_string_value (builder, hash);
          json_builder_end_object (builder);
          dc_cli_print_json (builder);
        }
    }
  leave (state);
}

static gboolean
signal_cb (gpointer user_data)
{
  State *state = user_data;

  state->stopped = TRUE;
  dc_train_group_stop (state->train);
  leave (state);
  /* Removed when the command returns, with the other signal's source. */
  return G_SOURCE_CONTINUE;
}

int
dc_cli_train_group_run (DcCliOptions            *options,
                        DcContext               *context,
                        const DcTrainingRequest *request,
                        gboolean                 seed_given,
                        const DcCliTrainGroupArgs *args)
{
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcTrainGroup) train = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *room = g_strdup (args->room);
  State state = { 0 };
  guint sigint, sigterm;

  if (!dc_mesh_check_plugins (&error))
    return dc_cli_fail (options, error);

  config.create = TRUE;
  config.approve = args->approve;
  config.hello = dc_context_new_hello (context, args->name != NULL ? args->name
                                                                   : g_get_host_name ());
  /* A group trains an Advanced size only when every device announced
   * enough memory for it. */
  config.hello->memory = dc_train_group_announced_memory ();
  if (args->test_probe_hash != NULL)
    {
      g_free (config.hello->probe_hash);
      config.hello->probe_hash = g_strdup (args->test_probe_hash);
    }
  config.peer.ice_addresses = g_strdupv (args->ice_addresses);
  group = dc_group_new (&config);

  if (room == NULL)
    {
      const char *pairs[] = { "event", "room", "room", NULL, NULL };

      room = dc_room_generate_code ();
      pairs[3] = room;
      if (options->json)
        print_pairs (options, pairs);
      else
        {
          g_print (_("Room code: %s\n"), room);
          fflush (stdout);
        }
    }

  loop = g_main_loop_new (NULL, FALSE);
  train = dc_train_group_new (context, group, config.hello, request, seed_given,
                              args->min_peers);
  if (args->resume != NULL
      && !dc_train_group_set_resume (train, args->resume, &args->resume_settings, &error))
    return dc_cli_fail (options, error);
  state.options = options;
  state.args = args;
  state.group = group;
  state.train = train;
  state.loop = loop;
  g_signal_connect (group, "event", G_CALLBACK (group_event_cb), &state);
  g_signal_connect (group, "failed", G_CALLBACK (failed_cb), &state);
  g_signal_connect (group, "approval-requested", G_CALLBACK (approval_requested_cb), &state);
  dc_cli_answers_init (&state.answers, group);
  g_signal_connect (train, "notice", G_CALLBACK (notice_cb), &state);
  g_signal_connect (train, "step", G_CALLBACK (step_cb), &state);
  g_signal_connect (train, "finished", G_CALLBACK (finished_cb), &state);
  sigint = g_unix_signal_add (SIGINT, signal_cb, &state);
  sigterm = g_unix_signal_add (SIGTERM, signal_cb, &state);

  dc_train_group_start (train);
  if (!dc_group_join_room (group, args->signal_url, room, &error))
    state.exit_status = dc_cli_fail (options, error);
  else if (!state.stopped)
    g_main_loop_run (loop);

  g_source_remove (sigint);
  g_source_remove (sigterm);
  g_signal_handlers_disconnect_by_data (group, &state);
  g_signal_handlers_disconnect_by_data (train, &state);
  dc_train_group_stop (train);
  dc_cli_answers_clear (&state.answers);
  return state.exit_status;
}
