/* test-ui-group.c: the application hosts a room and answers join requests.
 *
 * Runs DcApplication under Xvfb with a group confined to loopback (signaling
 * served on 127.0.0.1, ICE on 127.0.0.1 only, group-autostart off so no
 * multicast is sent). Through group.create-room the application becomes the
 * host of a new room; a `daisychain-cli join` child process asks to join, the
 * test finds the mapped Accept/Decline dialog and answers Accept through
 * adw_message_dialog_response(), the child reports "approved" and
 * "peer-joined", and the Devices view lists the child's name with its hello.
 * A second child is declined and reports "declined"; a third one is killed
 * while its dialog is open, and the dialog goes away. Then the other way
 * round: a child serves and hosts a room (`join --serve`), and the
 * application joins it as a member through the Join dialog. Every wait has a
 * deadline; children die with the test (PR_SET_PDEATHSIG) and are killed at
 * its end. A screenshot of the Devices view goes to
 * build/tests/screenshots/group-devices.png, one of the request dialog to
 * group-request.png.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <adwaita.h>
#include <json-glib/json-glib.h>

#include "dc-application.h"
#include "dc-join-room-dialog.h"
#include "dc-preferences-window.h"
#include "dc-test-proc.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-window.h"
#include "mesh/dc-gst-quirks.h"

#define TIMEOUT_MS 30000

/* `daisychain-cli join` with @args (NULL-terminated), confined to loopback. */
static DcTestProc *
proc_spawn (const char         *name,
            const char * const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  const char *common[] = {
    "join", "--json", "--name", name, "--approve", "all", "--ice-address", "127.0.0.1",
    "--backend", "cpu", "--probe-hash", "0123abcd", NULL
  };

  for (guint i = 0; common[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) common[i]);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  return dc_test_proc_spawn (name, NULL, FALSE, (const char * const *) argv->pdata);
}

static DcTestProc *
proc_join (const char *name,
           const char *url,
           const char *code)
{
  const char *args[] = { "--signal", url, "--room", code, "--no-create", NULL };

  return proc_spawn (name, args);
}


static JsonObject *
proc_get (DcTestProc       *proc,
          const char *event)
{
  for (guint i = 0; i < proc->events->len; i++)
    {
      JsonObject *o = g_ptr_array_index (proc->events, i);

      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), event) == 0)
        return o;
    }
  return NULL;
}

typedef struct
{
  DcGroup      *group;
  DcGroupState  state;
} StateWait;

static gboolean
state_reached_cb (gpointer user_data)
{
  StateWait *wait = user_data;

  return dc_group_get_state (wait->group) == wait->state;
}

static gboolean
body_names (GtkWidget *dialog,
            gpointer   name)
{
  return strstr (adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (dialog)), name) != NULL;
}

/* The mapped request dialog whose body names @name, or NULL. */
static AdwMessageDialog *
find_request_dialog (const char *name)
{
  return (AdwMessageDialog *) dc_test_find_toplevel (ADW_TYPE_MESSAGE_DIALOG, body_names,
                                                     (gpointer) name);
}

static gboolean
request_dialog_shown_cb (gpointer user_data)
{
  return find_request_dialog (user_data) != NULL;
}

static gboolean
request_dialog_gone_cb (gpointer user_data)
{
  return find_request_dialog (user_data) == NULL;
}

static AdwMessageDialog *
expect_request_dialog (const char *name)
{
  AdwMessageDialog *dialog;

  dc_test_wait_until (request_dialog_shown_cb, (gpointer) name, TIMEOUT_MS);
  dialog = find_request_dialog (name);
  if (dialog == NULL)
    g_error ("no Accept/Decline dialog for “%s” within %u ms", name, TIMEOUT_MS);
  g_assert_true (adw_message_dialog_has_response (dialog, "accept"));
  g_assert_true (adw_message_dialog_has_response (dialog, "decline"));
  return dialog;
}

static gboolean
is_row_titled (GtkWidget *widget,
               gpointer   title)
{
  return ADW_IS_ACTION_ROW (widget)
         && g_strcmp0 (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)), title) == 0;
}

/* The row of the device list titled @title, searched through the widget tree
 * as a person would look at it. */
static GtkWidget *
find_row (GtkWidget  *widget,
          const char *title)
{
  return dc_test_find_descendant (widget, is_row_titled, (gpointer) title);
}

typedef struct
{
  GtkWidget  *page;
  const char *title;
} RowWait;

static gboolean
row_shown_cb (gpointer user_data)
{
  RowWait *wait = user_data;
  GtkWidget *row = find_row (wait->page, wait->title);

  return row != NULL && gtk_widget_get_mapped (row);
}

static gboolean
join_dialog_shown_cb (gpointer user_data)
{
  *(GtkWidget **) user_data = dc_test_find_toplevel (DC_TYPE_JOIN_ROOM_DIALOG, NULL, NULL);
  return *(GtkWidget **) user_data != NULL;
}

static gboolean
is_leave_button (GtkWidget *widget,
                 gpointer   user_data)
{
  return GTK_IS_BUTTON (widget) && gtk_widget_get_mapped (widget)
         && g_strcmp0 (gtk_button_get_label (GTK_BUTTON (widget)), "_Leave") == 0;
}

static gboolean
leave_button_shown_cb (gpointer user_data)
{
  return dc_test_find_descendant (user_data, is_leave_button, NULL) != NULL;
}

static gboolean
is_switch (GtkWidget *widget,
           gpointer   user_data)
{
  return GTK_IS_SWITCH (widget);
}

typedef struct
{
  DcTestProc *proc;
  guint       from;
  const char *event;
} EventWait;

static gboolean
event_seen_cb (gpointer user_data)
{
  EventWait *wait = user_data;

  return dc_test_proc_find (wait->proc, wait->from, wait->event, "gui-host") >= 0;
}

/* Waits for @event about gui-host at or after event number @from. */
static void
wait_for_event (DcTestProc *proc,
                guint       from,
                const char *event)
{
  EventWait wait = { proc, from, event };

  if (!dc_test_wait_until (event_seen_cb, &wait, TIMEOUT_MS))
    g_error ("%s: no second “%s” for gui-host within %u ms", proc->label, event, TIMEOUT_MS);
}

/* A daisychain-cli process hosts a room; the application joins it the way a
 * room heard on the local network is joined (dc_group_join_found(), what
 * discovery calls: no multicast here). A toast says so and its Leave button
 * leaves; joined again, switching Preferences → Find a group at start off
 * leaves too, and the CLI host sees the application go both times. */
static void
check_lan_join (DcApplication *app,
                DcGroup       *group,
                GtkWindow     *window)
{
  const char *args[] = { "--serve", "--signal", "ws://127.0.0.1:0/signal", NULL };
  g_autoptr(DcTestProc) cli_host = proc_spawn ("lan-host", args);
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  StateWait member = { group, DC_GROUP_STATE_MEMBER };
  StateWait offline = { group, DC_GROUP_STATE_OFFLINE };
  JsonObject *listening, *room;
  GtkWidget *button, *preferences, *autostart;
  int first_left;

  dc_test_proc_expect (cli_host, "joined", NULL, TIMEOUT_MS);
  listening = proc_get (cli_host, "listening");
  room = proc_get (cli_host, "room");

  dc_group_join_found (group, json_object_get_string_member (listening, "url"),
                       json_object_get_string_member (room, "room"));
  if (!dc_test_wait_until (state_reached_cb, &member, TIMEOUT_MS))
    g_error ("not a member of the found room within %u ms", TIMEOUT_MS);
  g_assert_true (dc_group_get_via_lan (group));
  dc_test_proc_expect (cli_host, "peer-joined", "gui-host", TIMEOUT_MS);
  if (!dc_test_wait_until (leave_button_shown_cb, window, TIMEOUT_MS))
    g_error ("no toast with a Leave button within %u ms", TIMEOUT_MS);
  button = dc_test_find_descendant (GTK_WIDGET (window), is_leave_button, NULL);
  /* GtkButton's activate shows the press for a moment, then clicks. */
  g_assert_true (gtk_widget_activate (button));
  if (!dc_test_wait_until (state_reached_cb, &offline, TIMEOUT_MS))
    g_error ("still in the LAN group %u ms after Leave", TIMEOUT_MS);
  dc_test_proc_expect (cli_host, "peer-left", "gui-host", TIMEOUT_MS);

  /* Automatic grouping switched off in Preferences: the LAN group is left. */
  g_settings_set_boolean (settings, "group-autostart", TRUE);
  dc_group_join_found (group, json_object_get_string_member (listening, "url"),
                       json_object_get_string_member (room, "room"));
  if (!dc_test_wait_until (state_reached_cb, &member, TIMEOUT_MS))
    g_error ("not a member of the found room again within %u ms", TIMEOUT_MS);
  first_left = dc_test_proc_find (cli_host, 0, "peer-left", "gui-host");
  g_assert_cmpint (first_left, >=, 0);
  wait_for_event (cli_host, first_left + 1, "peer-joined");
  g_action_group_activate_action (G_ACTION_GROUP (app), "preferences", NULL);
  preferences = dc_test_find_toplevel (DC_TYPE_PREFERENCES_WINDOW, NULL, NULL);
  g_assert_nonnull (preferences);
  autostart = dc_test_find_descendant (preferences, is_switch, NULL);
  g_assert_nonnull (autostart);
  g_assert_true (gtk_switch_get_active (GTK_SWITCH (autostart)));
  gtk_switch_set_active (GTK_SWITCH (autostart), FALSE);
  g_assert_false (g_settings_get_boolean (settings, "group-autostart"));
  if (!dc_test_wait_until (state_reached_cb, &offline, TIMEOUT_MS))
    g_error ("still in the LAN group %u ms after the switch went off", TIMEOUT_MS);
  wait_for_event (cli_host, first_left + 1, "peer-left");
  gtk_window_destroy (GTK_WINDOW (preferences));
}

/* The other way round: a daisychain-cli process serves and hosts a room, and
 * the application joins it as a member through the Join dialog. */
static void
check_join_dialog (DcGroup   *group,
                   GtkWidget *page)
{
  const char *args[] = { "--serve", "--signal", "ws://127.0.0.1:0/signal", NULL };
  g_autoptr(DcTestProc) cli_host = proc_spawn ("cli-host", args);
  StateWait member = { group, DC_GROUP_STATE_MEMBER };
  RowWait row = { page, "cli-host" };
  GtkWidget *dialog = NULL;
  JsonObject *listening, *room;

  dc_test_proc_expect (cli_host, "joined", NULL, TIMEOUT_MS);
  listening = proc_get (cli_host, "listening");
  room = proc_get (cli_host, "room");
  g_assert_nonnull (listening);
  g_assert_nonnull (room);

  g_assert_true (gtk_widget_activate_action (page, "group.join-room", NULL));
  if (!dc_test_wait_until (join_dialog_shown_cb, &dialog, TIMEOUT_MS))
    g_error ("no Join dialog within %u ms", TIMEOUT_MS);
  /* Join needs both fields. */
  g_assert_false (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog), "join"));
  dc_join_room_dialog_set_code (DC_JOIN_ROOM_DIALOG (dialog),
                                json_object_get_string_member (room, "room"));
  dc_join_room_dialog_set_url (DC_JOIN_ROOM_DIALOG (dialog),
                               json_object_get_string_member (listening, "url"));
  g_assert_true (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog), "join"));
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "join");

  if (!dc_test_wait_until (state_reached_cb, &member, TIMEOUT_MS))
    g_error ("not a member of the CLI's room within %u ms", TIMEOUT_MS);
  g_assert_false (dc_group_get_is_host (group));
  dc_test_proc_expect (cli_host, "peer-joined", "gui-host", TIMEOUT_MS);
  if (!dc_test_wait_until (row_shown_cb, &row, TIMEOUT_MS))
    g_error ("“cli-host” not in the device list within %u ms", TIMEOUT_MS);

  g_assert_true (gtk_widget_activate_action (page, "group.leave", NULL));
  dc_test_proc_expect (cli_host, "peer-left", "gui-host", TIMEOUT_MS);
}

static void
check_group (DcApplication *app)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));
  DcGroup *group = dc_application_get_group (app);
  GtkWidget *page;
  g_autoptr(DcTestProc) good = NULL;
  g_autoptr(DcTestProc) declined = NULL;
  g_autoptr(DcTestProc) quitter = NULL;
  g_autofree char *code = NULL;
  g_autofree char *url = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  AdwMessageDialog *dialog;
  StateWait host = { group, DC_GROUP_STATE_HOST };
  RowWait row = { NULL, "good-device" };
  GtkWidget *found;
  DcPeer *peer;
  JsonObject *own;
  const char *body;

  g_assert_true (DC_IS_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  g_action_group_activate_action (G_ACTION_GROUP (window), "view",
                                  g_variant_new_string ("devices"));
  page = GTK_WIDGET (dc_window_get_group_page (DC_WINDOW (window)));
  row.page = page;
  g_assert_true (dc_group_page_get_group (DC_GROUP_PAGE (page)) == group);
  g_assert_cmpint (dc_group_get_state (group), ==, DC_GROUP_STATE_OFFLINE);

  /* Create a room: this application serves signaling and hosts. */
  g_assert_true (gtk_widget_activate_action (page, "group.create-room", NULL));
  if (!dc_test_wait_until (state_reached_cb, &host, TIMEOUT_MS))
    g_error ("not host of the created room within %u ms", TIMEOUT_MS);
  g_assert_true (dc_group_get_is_host (group));
  code = g_strdup (dc_group_get_room_code (group));
  url = g_strdup (dc_group_get_signal_url (group));
  g_assert_nonnull (code);
  g_assert_true (g_str_has_prefix (url, "ws://127.0.0.1:"));

  /* A device asks; the host's dialog shows the certificate fingerprint and
   * address that the device shows for itself, and accepts it. */
  good = proc_join ("good-device", url, code);
  own = dc_test_proc_expect (good, "identity", NULL, TIMEOUT_MS);
  dialog = expect_request_dialog ("good-device");
  body = adw_message_dialog_get_body (dialog);
  g_test_message ("dialog: %s", body);
  g_assert_nonnull (strstr (body, json_object_get_string_member (own, "short")));
  g_assert_nonnull (strstr (body, "Address: 127.0.0.1"));
  g_assert_nonnull (strstr (body, "room code that you or a member shared"));
  g_clear_object (&texture);
  texture = dc_test_render_widget (GTK_WIDGET (dialog), "group-request");
  adw_message_dialog_response (dialog, "accept");
  dc_test_proc_expect (good, "approved", NULL, TIMEOUT_MS);
  dc_test_proc_expect (good, "peer-joined", "gui-host", TIMEOUT_MS);

  /* The Devices view lists it with what its hello said. */
  if (!dc_test_wait_until (row_shown_cb, &row, TIMEOUT_MS))
    g_error ("“good-device” not in the device list within %u ms", TIMEOUT_MS);
  found = find_row (page, "good-device");
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (found)), "0123abcd"));
  g_assert_cmpuint (g_list_model_get_n_items (dc_group_get_peers (group)), ==, 1);
  peer = g_list_model_get_item (dc_group_get_peers (group), 0);
  g_assert_cmpstr (dc_peer_get_name (peer), ==, "good-device");
  g_object_unref (peer);
  g_assert_cmpuint (dc_group_get_n_peers (group), ==, 1);
  g_assert_cmpuint (adw_view_stack_page_get_badge_number (
                      adw_view_stack_get_page (
                        ADW_VIEW_STACK (gtk_widget_get_parent (page)), page)), ==, 1);
  g_clear_object (&texture);
  texture = dc_test_render_widget (GTK_WIDGET (window), "group-devices");
  g_assert_cmpint (gdk_texture_get_width (texture), >=, 360);

  /* A device that gives up while the dialog is open takes the dialog away. */
  quitter = proc_join ("quitter-device", url, code);
  expect_request_dialog ("quitter-device");
  g_subprocess_force_exit (quitter->process);
  if (!dc_test_wait_until (request_dialog_gone_cb, (gpointer) "quitter-device", TIMEOUT_MS))
    g_error ("the dialog for a device that left is still shown after %u ms", TIMEOUT_MS);
  g_assert_cmpuint (dc_group_get_n_peers (group), ==, 1);

  /* A second device is declined and learns it. */
  declined = proc_join ("declined-device", url, code);
  dialog = expect_request_dialog ("declined-device");
  adw_message_dialog_response (dialog, "decline");
  dc_test_proc_expect (declined, "declined", NULL, TIMEOUT_MS);
  if (!dc_test_wait_until (dc_test_proc_exited, declined, TIMEOUT_MS))
    g_error ("the declined device still runs after %u ms", TIMEOUT_MS);
  g_assert_cmpint (declined->exit_status, ==, 1);
  g_assert_cmpint (dc_test_proc_find (declined, 0, "peer-joined", NULL), ==, -1);
  g_assert_null (find_row (page, "declined-device"));
  g_assert_cmpuint (dc_group_get_n_peers (group), ==, 1);

  /* Leave: the member hears the bye, the group is offline. */
  g_assert_true (gtk_widget_activate_action (page, "group.leave", NULL));
  g_assert_cmpint (dc_group_get_state (group), ==, DC_GROUP_STATE_OFFLINE);
  dc_test_proc_expect (good, "peer-left", "gui-host", TIMEOUT_MS);
  g_assert_cmpuint (g_list_model_get_n_items (dc_group_get_peers (group)), ==, 0);
  g_clear_pointer (&good, dc_test_proc_free);
  g_clear_pointer (&declined, dc_test_proc_free);
  g_clear_pointer (&quitter, dc_test_proc_free);

  check_join_dialog (group, page);
  check_lan_join (app, group, window);
}

static void
activate_cb (DcApplication *app,
             gpointer       user_data)
{
  gboolean *checked = user_data;

  check_group (app);
  *checked = TRUE;

  g_action_group_activate_action (G_ACTION_GROUP (app), "quit", NULL);
  g_assert_true (dc_test_wait_until (dc_test_app_has_no_windows, app, TIMEOUT_MS));
}

static void
test_host_accept_decline (void)
{
  g_autoptr(DcApplication) app = dc_application_new ();
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  g_autoptr(DcGroup) group = NULL;
  g_auto(DcMeshConfig) config = { 0 };
  const char *loopback[] = { "127.0.0.1", NULL };
  g_autoptr(GError) error = NULL;
  gboolean checked = FALSE;

  if (!dc_mesh_check_plugins (&error))
    {
      g_test_skip (error->message);
      return;
    }

  /* No multicast: discovery stays off, the room is created explicitly. */
  g_settings_set_boolean (settings, "group-autostart", FALSE);
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ASK;
  config.hello = dc_mesh_hello_new ("gui-host", "cpu", "", 0);
  config.peer.ice_addresses = g_strdupv ((char **) loopback);
  group = dc_group_new (&config);
  dc_group_set_serve_address (group, "127.0.0.1");

  g_application_set_flags (G_APPLICATION (app), G_APPLICATION_NON_UNIQUE);
  dc_application_set_group (app, group);
  g_signal_connect_after (app, "activate", G_CALLBACK (activate_cb), &checked);
  g_assert_cmpint (g_application_run (G_APPLICATION (app), 0, NULL), ==, 0);
  g_assert_true (checked);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);

  /* Peers stop in these cases' process: GStreamer 1.22's sctp teardown
   * warning (each case installs its quirk: g_test_run () clears it). */
  dc_gst_quirks_add_test ("/dc/ui/group/host-accept-decline", test_host_accept_decline);

  return g_test_run ();
}
