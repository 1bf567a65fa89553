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

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <adwaita.h>
#include <json-glib/json-glib.h>

#include "dc-application.h"
#include "dc-join-room-dialog.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-window.h"

#define TIMEOUT_MS 30000

/* One child process and the JSON event lines it printed. */
typedef struct
{
  char             *label;
  GSubprocess      *process;
  GDataInputStream *lines;
  GPtrArray        *events;      /* JsonObject* */
  GCancellable     *cancellable;
  gboolean          eof;
  gboolean          exited;
  int               exit_status;
} Proc;

static void read_next (Proc *proc);

static void
line_cb (GObject      *object,
         GAsyncResult *result,
         gpointer      user_data)
{
  Proc *proc = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();

  line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (object), result, NULL,
                                                     &error);
  if (line == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        proc->eof = TRUE;
      return;
    }
  g_test_message ("%s: %s", proc->label, line);
  if (json_parser_load_from_data (parser, line, -1, NULL)
      && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    g_ptr_array_add (proc->events,
                     json_object_ref (json_node_get_object (json_parser_get_root (parser))));
  read_next (proc);
}

static void
read_next (Proc *proc)
{
  g_data_input_stream_read_line_async (proc->lines, G_PRIORITY_DEFAULT, proc->cancellable,
                                       line_cb, proc);
}

static void
wait_cb (GObject      *object,
         GAsyncResult *result,
         gpointer      user_data)
{
  Proc *proc = user_data;

  if (g_subprocess_wait_finish (G_SUBPROCESS (object), result, NULL))
    {
      proc->exited = TRUE;
      proc->exit_status = g_subprocess_get_if_exited (proc->process)
                          ? g_subprocess_get_exit_status (proc->process) : -1;
    }
}

/* In the child before exec: die with the test. */
static void
child_setup (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* `daisychain-cli join` with @args (NULL-terminated), confined to loopback. */
static Proc *
proc_spawn (const char         *name,
            const char * const *args)
{
  Proc *proc = g_new0 (Proc, 1);
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GError) error = NULL;
  const char *common[] = {
    "join", "--json", "--name", name, "--approve", "all", "--ice-address", "127.0.0.1",
    "--backend", "cpu", "--probe-hash", "0123abcd", NULL
  };

  g_ptr_array_add (argv, dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL));
  for (guint i = 0; common[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (common[i]));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);

  proc->label = g_strdup (name);
  proc->events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  proc->cancellable = g_cancellable_new ();
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_subprocess_launcher_set_child_setup (launcher, child_setup, NULL, NULL);
  proc->process = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata,
                                                &error);
  g_assert_no_error (error);
  proc->lines = g_data_input_stream_new (g_subprocess_get_stdout_pipe (proc->process));
  read_next (proc);
  g_subprocess_wait_async (proc->process, proc->cancellable, wait_cb, proc);
  return proc;
}

static Proc *
proc_join (const char *name,
           const char *url,
           const char *code)
{
  const char *args[] = { "--signal", url, "--room", code, "--no-create", NULL };

  return proc_spawn (name, args);
}

static void
proc_free (Proc *proc)
{
  if (proc == NULL)
    return;
  if (!proc->exited)
    {
      g_subprocess_force_exit (proc->process);
      g_subprocess_wait (proc->process, NULL, NULL);
    }
  g_cancellable_cancel (proc->cancellable);
  /* Let the cancelled callbacks run before their data goes. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_clear_object (&proc->lines);
  g_clear_object (&proc->process);
  g_clear_object (&proc->cancellable);
  g_ptr_array_unref (proc->events);
  g_free (proc->label);
  g_free (proc);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Proc, proc_free)

static JsonObject *
proc_get (Proc       *proc,
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

static int
proc_find (Proc       *proc,
           const char *event,
           const char *peer)
{
  for (guint i = 0; i < proc->events->len; i++)
    {
      JsonObject *o = g_ptr_array_index (proc->events, i);

      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), event) == 0
          && (peer == NULL
              || g_strcmp0 (json_object_get_string_member_with_default (o, "peer", ""),
                            peer) == 0))
        return (int) i;
    }
  return -1;
}

typedef struct
{
  Proc       *proc;
  const char *event;
  const char *peer;
} FindWait;

static gboolean
event_seen_cb (gpointer user_data)
{
  FindWait *wait = user_data;

  return proc_find (wait->proc, wait->event, wait->peer) >= 0 || wait->proc->eof;
}

static void
proc_expect (Proc       *proc,
             const char *event,
             const char *peer)
{
  FindWait wait = { proc, event, peer };

  dc_test_wait_until (event_seen_cb, &wait, TIMEOUT_MS);
  if (proc_find (proc, event, peer) < 0)
    g_error ("%s: no “%s” event%s%s within %u ms", proc->label, event, peer ? " for " : "",
             peer ? peer : "", TIMEOUT_MS);
}

static gboolean
exited_cb (gpointer user_data)
{
  return ((Proc *) user_data)->exited;
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

/* The other way round: a daisychain-cli process serves and hosts a room, and
 * the application joins it as a member through the Join dialog. */
static void
check_join_dialog (DcGroup   *group,
                   GtkWidget *page)
{
  const char *args[] = { "--serve", "--signal", "ws://127.0.0.1:0/signal", NULL };
  g_autoptr(Proc) cli_host = proc_spawn ("cli-host", args);
  StateWait member = { group, DC_GROUP_STATE_MEMBER };
  RowWait row = { page, "cli-host" };
  GtkWidget *dialog = NULL;
  JsonObject *listening, *room;

  proc_expect (cli_host, "joined", NULL);
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
  proc_expect (cli_host, "peer-joined", "gui-host");
  if (!dc_test_wait_until (row_shown_cb, &row, TIMEOUT_MS))
    g_error ("“cli-host” not in the device list within %u ms", TIMEOUT_MS);

  g_assert_true (gtk_widget_activate_action (page, "group.leave", NULL));
  proc_expect (cli_host, "peer-left", "gui-host");
}

static void
check_group (DcApplication *app)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));
  DcGroup *group = dc_application_get_group (app);
  GtkWidget *page;
  g_autoptr(Proc) good = NULL;
  g_autoptr(Proc) declined = NULL;
  g_autoptr(Proc) quitter = NULL;
  g_autofree char *code = NULL;
  g_autofree char *url = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  AdwMessageDialog *dialog;
  StateWait host = { group, DC_GROUP_STATE_HOST };
  RowWait row = { NULL, "good-device" };
  GtkWidget *found;
  DcPeer *peer;

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

  /* A device asks; the host's dialog accepts it. */
  good = proc_join ("good-device", url, code);
  dialog = expect_request_dialog ("good-device");
  g_clear_object (&texture);
  texture = dc_test_render_widget (GTK_WIDGET (dialog), "group-request");
  adw_message_dialog_response (dialog, "accept");
  proc_expect (good, "approved", NULL);
  proc_expect (good, "peer-joined", "gui-host");

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

  /* A second device is declined and learns it. */
  declined = proc_join ("declined-device", url, code);
  dialog = expect_request_dialog ("declined-device");
  adw_message_dialog_response (dialog, "decline");
  proc_expect (declined, "declined", NULL);
  if (!dc_test_wait_until (exited_cb, declined, TIMEOUT_MS))
    g_error ("the declined device still runs after %u ms", TIMEOUT_MS);
  g_assert_cmpint (declined->exit_status, ==, 1);
  g_assert_cmpint (proc_find (declined, "peer-joined", NULL), ==, -1);
  g_assert_null (find_row (page, "declined-device"));
  g_assert_cmpuint (dc_group_get_n_peers (group), ==, 1);

  /* A device that gives up while the dialog is open takes the dialog away. */
  quitter = proc_join ("quitter-device", url, code);
  expect_request_dialog ("quitter-device");
  g_subprocess_force_exit (quitter->process);
  if (!dc_test_wait_until (request_dialog_gone_cb, (gpointer) "quitter-device", TIMEOUT_MS))
    g_error ("the dialog for a device that left is still shown after %u ms", TIMEOUT_MS);
  g_assert_cmpuint (dc_group_get_n_peers (group), ==, 1);

  /* Leave: the member hears the bye, the group is offline. */
  g_assert_true (gtk_widget_activate_action (page, "group.leave", NULL));
  g_assert_cmpint (dc_group_get_state (group), ==, DC_GROUP_STATE_OFFLINE);
  proc_expect (good, "peer-left", "gui-host");
  g_assert_cmpuint (g_list_model_get_n_items (dc_group_get_peers (group)), ==, 0);
  g_clear_pointer (&good, proc_free);
  g_clear_pointer (&declined, proc_free);
  g_clear_pointer (&quitter, proc_free);

  check_join_dialog (group, page);
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

  g_test_add_func ("/dc/ui/group/host-accept-decline", test_host_accept_decline);

  return g_test_run ();
}
