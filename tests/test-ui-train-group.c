/* test-ui-train-group.c: the app and a CLI device train together (suite ui).
 *
 * Under Xvfb: a `daisychain-cli signal` service on 127.0.0.1 and the
 * application in a room of it (ICE on 127.0.0.1 only, group-autostart off so
 * no multicast is sent, the CPU backend as the CLI's). A `daisychain-cli
 * train --room` child joins with its own flags (width 32, seed 99). Start
 * pressed in the app starts the run on both: the child follows the app's
 * settings (width 16, 100 steps), and at every step the app's log line for the
 * step ("step N (loss L): 2 devices agree on weight hash H") names the loss
 * and hash the child printed for it; the chart holds every step, the Group
 * statistic says two devices and the effective batch, and one device is
 * marked slowest. Then the other way round: a `train --min-peers 2` child
 * hosts a room and starts; the app joins it and follows with the child's
 * settings (batch 3 shown in its Run Settings), the same loss and hash at
 * every step. Only exactness and texts are checked, never timing: every
 * wait has a deadline and names what it waited for.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <stdlib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <adwaita.h>
#include <json-glib/json-glib.h>

#include "dc-application.h"
#include "dc-context.h"
#include "dc-test-proc.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-window.h"
#include "mesh/dc-room.h"
#include "mesh/dc-gst-quirks.h"

/* Far above what an event takes on an idle machine; a loaded 2-core machine
 * stalls processes for seconds. */
#define TIMEOUT_MS 60000
#define STEPS      100  /* the settings' least */

/* Save and Load run off the main thread: wait for them. */
static gboolean
page_has_no_job (gpointer user_data)
{
  return !dc_train_page_is_working (user_data);
}

static gboolean
cli_connected_cb (gpointer user_data)
{
  GListModel *peers = dc_group_get_peers (user_data);

  for (guint i = 0; i < g_list_model_get_n_items (peers); i++)
    {
      g_autoptr(DcPeer) peer = g_list_model_get_item (peers, i);

      if (dc_peer_get_state (peer) == DC_PEER_STATE_OPEN
          && g_strcmp0 (dc_peer_get_name (peer), "cli-device") == 0)
        return TRUE;
    }
  return FALSE;
}

static gboolean
resume_connected_cb (gpointer user_data)
{
  GListModel *peers = dc_group_get_peers (user_data);

  for (guint i = 0; i < g_list_model_get_n_items (peers); i++)
    {
      g_autoptr(DcPeer) peer = g_list_model_get_item (peers, i);

      if (dc_peer_get_state (peer) == DC_PEER_STATE_OPEN
          && g_strcmp0 (dc_peer_get_name (peer), "cli-resume") == 0)
        return TRUE;
    }
  return FALSE;
}

static gboolean
is_host_cb (gpointer user_data)
{
  return dc_group_get_state (user_data) == DC_GROUP_STATE_HOST;
}

static gboolean
page_is_idle (gpointer user_data)
{
  return !dc_train_page_is_running (user_data);
}

static gboolean
label_starts_with (GtkWidget *widget,
                   gpointer   prefix)
{
  return GTK_IS_LABEL (widget)
         && g_str_has_prefix (gtk_label_get_label (GTK_LABEL (widget)), prefix);
}

static gboolean
label_contains (GtkWidget *widget,
                gpointer   text)
{
  return GTK_IS_LABEL (widget) && strstr (gtk_label_get_label (GTK_LABEL (widget)), text) != NULL;
}

/* The app's log line for @step: its loss and hash (the last one: a log can
 * hold two runs). */
static gboolean
app_step (const char  *log,
          guint        step,
          float       *loss,
          char       **hash)
{
  g_autofree char *prefix = g_strdup_printf ("step %u (loss ", step);
  g_auto(GStrv) lines = g_strsplit (log, "\n", -1);

  for (guint i = g_strv_length (lines); i-- > 0;)
    {
      const char *agree;

      if (!g_str_has_prefix (lines[i], prefix))
        continue;
      agree = strstr (lines[i], "): 2 devices agree on weight hash ");
      g_assert_nonnull (agree);
      *loss = strtof (lines[i] + strlen (prefix), NULL);
      *hash = g_strdup (agree + strlen ("): 2 devices agree on weight hash "));
      return TRUE;
    }
  return FALSE;
}

/* Every step the child printed is in the app's log with the same loss and
 * hash, agreed by both devices; returns how many steps there were. */
static guint
check_same_points (DcTestProc *cli,
                   const char *log)
{
  guint n = 0;

  for (guint i = 0; i < cli->events->len; i++)
    {
      JsonObject *o = g_ptr_array_index (cli->events, i);
      g_autofree char *hash = NULL;
      guint step;
      float loss = 0.0f;

      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), "step") != 0)
        continue;
      step = json_object_get_int_member (o, "step");
      g_assert_cmpint (json_object_get_int_member (o, "roster"), ==, 2);
      if (!app_step (log, step, &loss, &hash))
        g_error ("the app's log has no agreed step %u:\n%s", step, log);
      g_assert_cmpstr (hash, ==, json_object_get_string_member (o, "hash"));
      g_assert_cmpfloat (loss, ==, (float) json_object_get_double_member (o, "loss"));
      n++;
    }
  return n;
}

static gboolean
page_is_running (gpointer user_data)
{
  return dc_train_page_is_running (user_data);
}

static gboolean
cli_reached_105 (gpointer user_data)
{
  DcTestProc *proc = user_data;

  for (int i = 0; (i = dc_test_proc_find (proc, i, "step", NULL)) >= 0; i++)
    if (json_object_get_int_member (g_ptr_array_index (proc->events, i), "step") >= 105)
      return TRUE;
  return proc->eof;
}

/* The CLI device switched to a checkpoint loaded mid-run (or ended). */
static gboolean
cli_switched (gpointer user_data)
{
  DcTestProc *proc = user_data;

  for (int i = 0; (i = dc_test_proc_find (proc, i, "checkpoint", NULL)) >= 0; i++)
    if (strstr (json_object_get_string_member_with_default (g_ptr_array_index (proc->events, i),
                                                            "message", ""),
                "continuing from the checkpoint") != NULL)
      return TRUE;
  return proc->eof;
}

/* Start after Load with a group continues the loaded model on every
 * device: the app hosts a room with a CLI device, loads the checkpoint of
 * step 100 and starts with 150 steps; the CLI device follows the run "from
 * its checkpoint at step 100" and its first step is 101. Once it passed step
 * 105 the app loads the same checkpoint again, mid-run: it goes to the
 * group (the app leads, or forwards it to the CLI device) and both continue
 * from it after a step ("continuing from the checkpoint" on the CLI
 * device). The CLI device ends step 150 with the hash of `train --resume
 * FILE --steps 150 --simulate-peers 2`. */
static void
check_resume (DcApplication *app,
              DcGroup       *group,
              const char    *url,
              const char    *first_pt)
{
  DcWindow *window = DC_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  DcTrainPage *page = dc_window_get_train_page (window);
  GSettings *settings = dc_application_get_settings (app);
  g_autoptr(DcTestProc) cli = NULL, sim = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *code = dc_room_generate_code ();
  g_autofree char *log = NULL;
  JsonObject *config, *done, *sim_done;

  g_assert_true (dc_group_join_room (group, url, code, &error));
  g_assert_no_error (error);
  if (!dc_test_wait_until (is_host_cb, group, TIMEOUT_MS))
    g_error ("the app is not the room's host within %u ms", TIMEOUT_MS);
  cli = dc_test_proc_spawn ("cli-resume", NULL, FALSE,
                            (const char *[]) { "train", "--json", "--signal", url, "--room",
                                               code, "--name", "cli-resume", "--ice-address",
                                               "127.0.0.1", "--backend", "cpu", "--threads",
                                               "1", NULL });
  sim = dc_test_proc_spawn ("sim", NULL, FALSE,
                            (const char *[]) { "train", "--json", "--resume", first_pt,
                                               "--steps", "150", "--simulate-peers", "2",
                                               "--threads", "1", NULL });
  if (!dc_test_wait_until (resume_connected_cb, group, TIMEOUT_MS))
    g_error ("the app is not connected to cli-resume within %u ms", TIMEOUT_MS);

  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.load-checkpoint-from",
                                             "s", first_pt));
  g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
  g_settings_set_int (settings, "train-steps", 150);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.start", NULL));
  config = dc_test_proc_expect (cli, "config", NULL, TIMEOUT_MS);
  g_assert_nonnull (strstr (json_object_get_string_member (config, "message"),
                            "from its checkpoint at step 100"));
  if (!dc_test_wait_until (cli_reached_105, cli, TIMEOUT_MS))
    g_error ("cli-resume: no step 105 within %u ms", TIMEOUT_MS);
  g_assert_true (dc_train_page_is_running (page));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.load-checkpoint-from",
                                             "s", first_pt));
  g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
  if (!dc_test_wait_until (cli_switched, cli, 2 * TIMEOUT_MS) || cli->eof)
    g_error ("cli-resume: no switch to the checkpoint loaded mid-run");
  done = dc_test_proc_expect (cli, "done", NULL, 2 * TIMEOUT_MS);
  sim_done = dc_test_proc_expect (sim, "done", NULL, 2 * TIMEOUT_MS);
  g_assert_cmpint (json_object_get_int_member (done, "step"), ==, 150);
  g_assert_cmpstr (json_object_get_string_member (done, "hash"), ==,
                   json_object_get_string_member (sim_done, "hash"));
  g_assert_cmpint (json_object_get_int_member (g_ptr_array_index (cli->events,
                                                                  dc_test_proc_find (cli, 0, "step",
                                                                                     NULL)),
                                               "step"), ==, 101);
  if (!dc_test_wait_until (page_is_idle, page, TIMEOUT_MS))
    g_error ("the app still trains %u ms after the CLI device finished", TIMEOUT_MS);
  log = dc_train_page_dup_log (page);
  g_assert_nonnull (strstr (log, "starting the run with 2 devices from the checkpoint at step "
                                 "100"));
  g_assert_nonnull (strstr (log, "the group continues from it after a step"));
  g_assert_nonnull (strstr (log, "continuing from the checkpoint"));
  dc_group_leave (group);
}

/* The other way round: the CLI device hosts and starts (train --min-peers
 * 2), the app joins its room and follows: it trains the CLI's run with the
 * CLI's settings, which its Run Settings then show. */
static void
check_follow (DcApplication *app,
              DcGroup       *group,
              const char    *url,
              const char    *first_pt,
              const char    *first_hash)
{
  DcWindow *window = DC_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  DcTrainPage *page = dc_window_get_train_page (window);
  GSettings *settings = dc_application_get_settings (app);
  g_autoptr(DcTestProc) cli = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *log = NULL;
  JsonObject *room;

  cli = dc_test_proc_spawn ("cli-host", NULL, FALSE,
                            (const char *[]) { "train", "--json", "--signal", url, "--name",
                                               "cli-host", "--approve", "all", "--ice-address",
                                               "127.0.0.1", "--backend", "cpu", "--threads", "1",
                                               "--min-peers", "2", "--width", "16", "--seq",
                                               "16", "--batch", "3", "--steps", "100", NULL });
  room = dc_test_proc_expect (cli, "room", NULL, TIMEOUT_MS);
  dc_test_proc_expect (cli, "joined", NULL, TIMEOUT_MS);
  g_assert_true (dc_group_join_room (group, url, json_object_get_string_member (room, "room"),
                                     &error));
  g_assert_no_error (error);
  if (!dc_test_wait_until (page_is_running, page, TIMEOUT_MS))
    g_error ("the app did not follow the CLI's run within %u ms", TIMEOUT_MS);
  dc_test_proc_expect (cli, "done", NULL, 2 * TIMEOUT_MS);
  if (!dc_test_wait_until (page_is_idle, page, TIMEOUT_MS))
    g_error ("the app still trains %u ms after the CLI device finished", TIMEOUT_MS);

  log = dc_train_page_dup_log (page);
  g_assert_nonnull (strstr (log, "following the run “cli-host” started: width 16, sequence 16, "
                                 "batch 3, 100 steps"));
  g_assert_cmpuint (check_same_points (cli, log), ==, STEPS);
  g_assert_cmpint (g_settings_get_int (settings, "train-batch"), ==, 3);
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (page), label_starts_with,
                                             (gpointer) "2 devices · effective batch 6"));
  dc_group_leave (group);

  /* A checkpoint loaded after a group run replaces that run's model: what is
   * saved next is the loaded one. */
  {
    g_autofree char *again = g_strconcat (first_pt, ".again.pt", NULL);
    g_autofree char *saved = NULL;
    g_autofree char *all = NULL;

    g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.load-checkpoint-from",
                                               "s", first_pt));
    g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
    g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.save-checkpoint-to",
                                               "s", again));
    g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
    saved = g_strdup_printf ("checkpoint saved: %s (step 100, weight hash %s)", again,
                             first_hash);
    all = dc_train_page_dup_log (page);
    g_assert_nonnull (strstr (all, saved));
    g_unlink (again);
  }
  check_resume (app, group, url, first_pt);
}

static void
check_train_together (DcApplication *app,
                      DcGroup       *group)
{
  DcWindow *window = DC_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  DcTrainPage *page = dc_window_get_train_page (window);
  GSettings *settings = dc_application_get_settings (app);
  g_autoptr(DcTestProc) signal = NULL;
  g_autoptr(DcTestProc) cli = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *code = dc_room_generate_code ();
  g_autofree char *log = NULL;
  g_autoptr(GdkTexture) shot = NULL;
  JsonObject *listening, *config;
  const char *url;

  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  signal = dc_test_proc_spawn ("signal", NULL, FALSE,
                               (const char *[]) { "signal", "--json", "--port", "0", "--bind",
                                                  "127.0.0.1", NULL });
  listening = dc_test_proc_expect (signal, "listening", NULL, TIMEOUT_MS);
  url = json_object_get_string_member (listening, "url");

  /* The app makes the room (it is its host); the CLI device joins it and
   * waits for a config: the host rule does not apply to it. */
  g_assert_true (dc_group_join_room (group, url, code, &error));
  g_assert_no_error (error);
  if (!dc_test_wait_until (is_host_cb, group, TIMEOUT_MS))
    g_error ("the app is not the room's host within %u ms", TIMEOUT_MS);
  cli = dc_test_proc_spawn ("cli-device", NULL, FALSE,
                            (const char *[]) { "train", "--json", "--signal", url, "--room",
                                               code, "--name", "cli-device", "--ice-address",
                                               "127.0.0.1", "--backend", "cpu", "--threads",
                                               "1", "--width", "32", "--seq", "16", "--batch",
                                               "4", "--seed", "99", NULL });
  if (!dc_test_wait_until (cli_connected_cb, group, TIMEOUT_MS))
    g_error ("the app is not connected to cli-device within %u ms", TIMEOUT_MS);

  /* Start in the app, with other settings than the CLI's own. */
  g_settings_set_int (settings, "train-width", 16);
  g_settings_set_int (settings, "train-seq-len", 16);
  g_settings_set_int (settings, "train-batch", 2);
  g_settings_set_int (settings, "train-steps", STEPS);
  g_settings_set_string (settings, "train-dataset", "builtin");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.start", NULL));

  config = dc_test_proc_expect (cli, "config", NULL, TIMEOUT_MS);
  g_test_message ("cli: %s", json_object_get_string_member (config, "message"));
  g_assert_nonnull (strstr (json_object_get_string_member (config, "message"),
                            "“gui-device” started: width 16, sequence 16, batch 2, 100 steps"));
  dc_test_proc_expect (cli, "done", NULL, 2 * TIMEOUT_MS);
  if (!dc_test_wait_until (page_is_idle, page, TIMEOUT_MS))
    g_error ("the app still trains %u ms after the CLI device finished", TIMEOUT_MS);

  /* The same points on both: loss and hash at every step. */
  log = dc_train_page_dup_log (page);
  g_assert_nonnull (strstr (log, "starting the run with 2 devices"));
  g_assert_nonnull (strstr (log, "“cli-device” joined the group"));
  g_assert_cmpuint (check_same_points (cli, log), ==, STEPS);
  g_assert_cmpuint (dc_loss_chart_get_n_points (dc_train_page_get_chart (page)), ==, STEPS);
  g_assert_nonnull (strstr (log, "training finished with the group at step 100"));

  /* The view: two devices, the effective batch, the slowest one marked. */
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (page), label_starts_with,
                                             (gpointer) "2 devices · effective batch 4"));
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (page), label_contains,
                                             (gpointer) "(slowest)"));
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (page), label_contains,
                                             (gpointer) "✓ "));
  shot = dc_test_render_widget (GTK_WIDGET (window), "train-group");
  dc_group_leave (group);

  /* The group run's model is this device's: it saves like a solo one. */
  {
    g_autofree char *dir = g_dir_make_tmp ("dc-ui-train-group-XXXXXX", NULL);
    g_autofree char *pt = g_build_filename (dir, "first.pt", NULL);
    g_autofree char *saved = NULL;
    g_autofree char *all = NULL;
    JsonObject *done = dc_test_proc_expect (cli, "done", NULL, TIMEOUT_MS);

    g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.save-checkpoint-to",
                                               "s", pt));
    g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
    saved = g_strdup_printf ("checkpoint saved: %s (step 100, weight hash %s)", pt,
                             json_object_get_string_member (done, "hash"));
    all = dc_train_page_dup_log (page);
    g_assert_nonnull (strstr (all, saved));

    check_follow (app, group, url, pt, json_object_get_string_member (done, "hash"));
    g_unlink (pt);
    g_rmdir (dir);
  }
}

typedef struct
{
  DcGroup  *group;
  gboolean  checked;
} Checked;

static void
activate_cb (DcApplication *app,
             gpointer       user_data)
{
  Checked *checked = user_data;

  check_train_together (app, checked->group);
  checked->checked = TRUE;
  g_action_group_activate_action (G_ACTION_GROUP (app), "quit", NULL);
  g_assert_true (dc_test_wait_until (dc_test_app_has_no_windows, app, TIMEOUT_MS));
}

static void
test_app_and_cli (void)
{
  g_autoptr(DcApplication) app = dc_application_new ();
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcContext) context = NULL;
  g_auto(DcMeshConfig) config = { 0 };
  const char *loopback[] = { "127.0.0.1", NULL };
  g_autoptr(GError) error = NULL;
  Checked checked = { 0 };

  if (!dc_mesh_check_plugins (&error))
    {
      g_test_skip (error->message);
      return;
    }

  /* No multicast; the CPU backend as the CLI's, so that the probe hashes
   * (admission) and the numerics match. */
  g_settings_set_boolean (settings, "group-autostart", FALSE);
  g_settings_set_string (settings, "backend", "cpu");
  context = dc_context_new (DC_BACKEND_CPU, &error);
  g_assert_no_error (error);
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ALL;
  config.hello = dc_context_new_hello (context, "gui-device");
  config.peer.ice_addresses = g_strdupv ((char **) loopback);
  group = dc_group_new (&config);
  checked.group = group;

  g_application_set_flags (G_APPLICATION (app), G_APPLICATION_NON_UNIQUE);
  dc_application_set_group (app, group);
  g_signal_connect_after (app, "activate", G_CALLBACK (activate_cb), &checked);
  g_assert_cmpint (g_application_run (G_APPLICATION (app), 0, NULL), ==, 0);
  g_assert_true (checked.checked);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);

  /* Peers stop in these cases' process: GStreamer 1.22's sctp teardown
   * warning (each case installs its quirk: g_test_run () clears it). */
  dc_gst_quirks_add_test ("/dc/ui/train-group/app-and-cli", test_app_and_cli);

  return g_test_run ();
}
