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

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  dc_ui_register_resource ();

  g_test_add_func ("/dc/ui/preferences/peer-servers", test_peer_servers);

  return g_test_run ();
}
