/* test-ui-preferences.c: what the Preferences window sets takes effect.
 *
 * Under Xvfb: the Preferences window's TURN and STUN rows, typed into as a
 * user would, change the settings, and the peer configuration the
 * application builds its group with (_dc_application_fill_peer_config)
 * carries them: the TURN URL as typed, the first STUN server as stun://.
 * A TURN value that is not a turn:// or turns:// URL is left out.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "dc-application-private.h"
#include "dc-group-page.h"
#include "dc-join-room-dialog.h"
#include "dc-preferences-window.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-ui-resources.h"

#define TIMEOUT_MS 30000

static gboolean
is_row_titled (GtkWidget *widget,
               gpointer   prefix)
{
  return ADW_IS_ENTRY_ROW (widget)
         && g_str_has_prefix (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)),
                              prefix);
}

static gboolean
is_spin_button (GtkWidget *widget,
                gpointer   user_data)
{
  return GTK_IS_SPIN_BUTTON (widget);
}

static void
type_into (GtkWidget  *window,
           const char *title_prefix,
           const char *text)
{
  GtkWidget *row = dc_test_find_descendant (window, is_row_titled, (gpointer) title_prefix);

  g_assert_nonnull (row);
  gtk_editable_set_text (GTK_EDITABLE (row), text);
}

static void
test_peer_servers (void)
{
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  GtkWidget *window = GTK_WIDGET (dc_preferences_window_new (settings));
  g_autofree char *turn = NULL;

  gtk_window_present (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));

  type_into (window, "TURN server", "turn://ann:secret@relay.example:3478");
  type_into (window, "STUN servers", " stun.example:3478, other.example:19302");
  turn = g_settings_get_string (settings, "turn-server");
  g_assert_cmpstr (turn, ==, "turn://ann:secret@relay.example:3478");
  {
    DcPeerConfig config = { 0 };

    _dc_application_fill_peer_config (settings, &config);
    g_assert_cmpstr (config.turn_server, ==, "turn://ann:secret@relay.example:3478");
    g_assert_cmpstr (config.stun_server, ==, "stun://stun.example:3478");
    g_free (config.turn_server);
    g_free (config.stun_server);
  }

  /* Not a TURN URL: left out rather than handed to webrtcbin. */
  type_into (window, "TURN server", "relay.example:3478");
  type_into (window, "STUN servers", "");
  {
    DcPeerConfig config = { 0 };

    _dc_application_fill_peer_config (settings, &config);
    g_assert_null (config.turn_server);
    g_assert_null (config.stun_server);
  }

  /* Model Cache: the folder as typed; the limit in GB, kept in MB. */
  type_into (window, "Cache folder", "/srv/models");
  {
    g_autofree char *dir = g_settings_get_string (settings, "model-cache-dir");

    g_assert_cmpstr (dir, ==, "/srv/models");
  }
  {
    GtkWidget *spin = dc_test_find_descendant (window, is_spin_button, NULL);

    g_assert_nonnull (spin);
    gtk_spin_button_set_value (GTK_SPIN_BUTTON (spin), 3);
    g_assert_cmpuint (g_settings_get_uint (settings, "model-cache-limit-mb"), ==, 3000);
  }

  gtk_window_destroy (GTK_WINDOW (window));
}

static gboolean
join_dialog_shown (gpointer user_data)
{
  return dc_test_find_toplevel (DC_TYPE_JOIN_ROOM_DIALOG, NULL, NULL) != NULL;
}

/* The signaling service typed in Preferences is what the Devices view's Join
 * dialog offers; a Join with another URL becomes the setting. */
static void
test_signal_url (void)
{
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  GtkWidget *preferences = GTK_WIDGET (dc_preferences_window_new (settings));
  GtkWindow *window = GTK_WINDOW (gtk_window_new ());
  DcGroupPage *page = g_object_new (DC_TYPE_GROUP_PAGE, NULL);
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  DcJoinRoomDialog *dialog;

  /* An offline group (nothing is served or sent): Join needs one. */
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ASK;
  config.hello = dc_mesh_hello_new ("prefs-test", "cpu", "", 0);
  group = dc_group_new (&config);

  gtk_window_present (GTK_WINDOW (preferences));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, preferences, TIMEOUT_MS));
  type_into (preferences, "Signaling service", "wss://signal.example/signal");
  gtk_window_destroy (GTK_WINDOW (preferences));

  dc_group_page_set_settings (page, settings);
  dc_group_page_set_group (page, group);
  gtk_window_set_child (window, GTK_WIDGET (page));
  gtk_window_present (window);
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "group.join-room", NULL));
  g_assert_true (dc_test_wait_until (join_dialog_shown, NULL, TIMEOUT_MS));
  dialog = DC_JOIN_ROOM_DIALOG (dc_test_find_toplevel (DC_TYPE_JOIN_ROOM_DIALOG, NULL, NULL));
  g_assert_cmpstr (dc_join_room_dialog_get_url (dialog), ==, "wss://signal.example/signal");
  gtk_window_destroy (GTK_WINDOW (dialog));
  gtk_window_destroy (window);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  dc_ui_register_resource ();

  g_test_add_func ("/dc/ui/preferences/peer-servers", test_peer_servers);
  g_test_add_func ("/dc/ui/preferences/signal-url", test_signal_url);

  return g_test_run ();
}
