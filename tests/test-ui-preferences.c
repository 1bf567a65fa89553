/* test-ui-preferences.c: what the Preferences window sets takes effect.
 *
 * Under Xvfb: the Preferences window's TURN and STUN rows, typed into as a
 * user would, change the settings, and the peer configuration the
 * application builds its group with (_dc_application_fill_peer_config)
 * carries them: the TURN URL as typed, the first STUN server as stun://.
 * A TURN value that is not a turn:// or turns:// URL is left out.
 * The backend row lists the Vulkan devices; what is picked there is the
 * backend of the context the application starts with, and the Train view
 * says which (with lavapipe as the only device: CPU forces the CPU, the
 * lavapipe id selects it, every kernel refused by its gate leaves the CPU
 * with the gate's reason, an unknown id is refused, named, and the choice
 * falls back to Automatic).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <adwaita.h>

#include "dc-application-private.h"
#include "dc-group-page.h"
#include "dc-join-room-dialog.h"
#include "dc-preferences-window.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-train-page.h"
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
is_action_row_prefixed (GtkWidget *widget,
                        gpointer   prefix)
{
  return ADW_IS_ACTION_ROW (widget)
         && g_str_has_prefix (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)),
                              prefix);
}

/* The group's gradient wire: the row is the setting the Train view's
 * Start reads (f32 by default, whose hashes match runs before it), in
 * train --gradient-wire's names, both ways. */
static void
test_gradient_wire (void)
{
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  GtkWidget *window = GTK_WIDGET (dc_preferences_window_new (settings));
  const char * const nicks[] = { "f32", "bf16", "int8" };
  g_autofree char *initial = g_settings_get_string (settings, "group-gradient-wire");
  GtkWidget *row;

  g_assert_cmpstr (initial, ==, "f32");
  gtk_window_present (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  row = dc_test_find_descendant (window, is_action_row_prefixed,
                                 (gpointer) "Gradients on the wire");
  g_assert_nonnull (row);
  g_assert_true (ADW_IS_COMBO_ROW (row));
  g_assert_cmpuint (adw_combo_row_get_selected (ADW_COMBO_ROW (row)), ==, 0);
  for (guint i = 3; i-- > 0;)
    {
      g_autofree char *nick = NULL;

      adw_combo_row_set_selected (ADW_COMBO_ROW (row), i);
      nick = g_settings_get_string (settings, "group-gradient-wire");
      g_assert_cmpstr (nick, ==, nicks[i]);
    }
  g_settings_set_string (settings, "group-gradient-wire", "int8");
  g_assert_cmpuint (adw_combo_row_get_selected (ADW_COMBO_ROW (row)), ==, 2);
  g_settings_reset (settings, "group-gradient-wire");
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

static gboolean
is_combo_titled (GtkWidget *widget,
                 gpointer   title)
{
  return ADW_IS_COMBO_ROW (widget)
         && g_str_equal (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)), title);
}

static gboolean
is_action_row_titled (GtkWidget *widget,
                      gpointer   title)
{
  return ADW_IS_ACTION_ROW (widget) && !ADW_IS_COMBO_ROW (widget)
         && g_str_equal (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)), title);
}

static void
assert_setting (GSettings  *settings,
                const char *key,
                const char *expected)
{
  g_autofree char *value = g_settings_get_string (settings, key);

  g_assert_cmpstr (value, ==, expected);
}

/* The position of the backend row's item containing @text, or -1. */
static int
find_item (AdwComboRow *row,
           const char  *text)
{
  GListModel *model = adw_combo_row_get_model (row);

  for (guint i = 0; i < g_list_model_get_n_items (model); i++)
    {
      const char *item = gtk_string_list_get_string (GTK_STRING_LIST (model), i);

      if (strstr (item, text) != NULL)
        return (int) i;
    }
  return -1;
}

/* What the Train view's backend row says for @context. */
static char *
train_view_says (DcContext *context)
{
  GtkWindow *window = GTK_WINDOW (gtk_window_new ());
  DcTrainPage *page = g_object_new (DC_TYPE_TRAIN_PAGE, NULL);
  GtkWidget *row;
  char *subtitle;

  dc_train_page_set_context (page, context);
  gtk_window_set_child (window, GTK_WIDGET (page));
  gtk_window_present (window);
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  row = dc_test_find_descendant (GTK_WIDGET (page), is_action_row_titled, (gpointer) "Computes on");
  g_assert_nonnull (row);
  subtitle = g_strdup (adw_action_row_get_subtitle (ADW_ACTION_ROW (row)));
  gtk_window_destroy (window);
  return subtitle;
}

static void
test_backend_choice (void)
{
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  g_autoptr(DcContext) context = NULL;
  g_auto(GStrv) ids = NULL, labels = NULL;
  g_autofree char *said = NULL;
  g_autofree char *lavapipe_id = NULL;
  GtkWidget *window;
  AdwComboRow *row;
  int item;

  dc_context_list_vulkan_devices (&ids, &labels);
  for (guint i = 0; labels[i] != NULL; i++)
    if (strstr (labels[i], "llvmpipe") != NULL)
      lavapipe_id = g_strdup (ids[i]);
  if (lavapipe_id == NULL || g_strv_length (ids) != 1)
    {
      g_test_skip ("needs lavapipe (mesa-vulkan-drivers) as the only Vulkan device");
      return;
    }

  window = GTK_WIDGET (dc_preferences_window_new (settings));
  gtk_window_present (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  row = ADW_COMBO_ROW (dc_test_find_descendant (window, is_combo_titled,
                                                (gpointer) "Compute backend"));
  g_assert_nonnull (row);
  /* Automatic, CPU, the best device, and lavapipe by its id. */
  g_assert_cmpuint (g_list_model_get_n_items (adw_combo_row_get_model (row)), ==, 4);
  g_assert_cmpint (adw_combo_row_get_selected (row), ==, 0);
  /* The application's window shows the list its context made at start:
   * the same items. */
  {
    g_autoptr(DcContext) cpu = dc_context_new (DC_BACKEND_CPU, NULL);
    GtkWidget *shared = GTK_WIDGET (dc_preferences_window_new_for_context (settings, cpu));
    AdwComboRow *shared_row;

    gtk_window_present (GTK_WINDOW (shared));
    g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, shared, TIMEOUT_MS));
    shared_row = ADW_COMBO_ROW (dc_test_find_descendant (shared, is_combo_titled,
                                                         (gpointer) "Compute backend"));
    g_assert_cmpint (find_item (shared_row, lavapipe_id), ==, 3);
    gtk_window_destroy (GTK_WINDOW (shared));
  }

  /* CPU: the CPU, even with a Vulkan device there. */
  adw_combo_row_set_selected (row, find_item (row, "CPU"));
  assert_setting (settings, "backend", "cpu");
  context = _dc_application_new_context (settings);
  g_assert_cmpint (dc_context_get_backend_kind (context), ==, DC_BACKEND_CPU);
  g_assert_null (dc_context_get_backend_note (context));
  said = train_view_says (context);
  g_assert_true (g_str_has_prefix (said, "CPU: "));
  g_clear_pointer (&said, g_free);
  g_clear_object (&context);

  /* Lavapipe by its id: Automatic would not take it (it is no GPU). */
  item = find_item (row, lavapipe_id);
  g_assert_cmpint (item, ==, 3);
  adw_combo_row_set_selected (row, item);
  assert_setting (settings, "vulkan-device", lavapipe_id);
  context = _dc_application_new_context (settings);
  g_assert_cmpint (dc_context_get_backend_kind (context), ==, DC_BACKEND_VULKAN);
  g_assert_cmpstr (dc_context_get_device_id (context), ==, lavapipe_id);
  said = train_view_says (context);
  g_assert_true (g_str_has_prefix (said, "Vulkan GPU: llvmpipe"));
  g_assert_nonnull (strstr (said, dc_context_get_kernel_name (context)));
  g_clear_pointer (&said, g_free);
  g_clear_object (&context);

  /* The same device with every kernel refused by its gate (the broken
   * twins): the CPU computes, and the gate's message says why. */
  g_setenv ("DC_TEST_BREAK_KERNEL", "all", TRUE);
  context = _dc_application_new_context (settings);
  g_unsetenv ("DC_TEST_BREAK_KERNEL");
  g_assert_cmpint (dc_context_get_backend_kind (context), ==, DC_BACKEND_CPU);
  g_assert_nonnull (strstr (dc_context_get_backend_note (context), "failed verification"));
  said = train_view_says (context);
  g_assert_true (g_str_has_prefix (said, "CPU: "));
  g_assert_nonnull (strstr (said, "Not on a GPU: Vulkan GEMM kernel"));
  g_clear_pointer (&said, g_free);
  g_clear_object (&context);
  gtk_window_destroy (GTK_WINDOW (window));

  /* An id no device has (a card taken out): refused with its id named,
   * Automatic used (the CPU here), and Preferences still shows it. */
  g_settings_set_string (settings, "vulkan-device", "10de:dead");
  context = _dc_application_new_context (settings);
  g_assert_cmpint (dc_context_get_backend_kind (context), ==, DC_BACKEND_CPU);
  g_assert_nonnull (strstr (dc_context_get_backend_note (context), "10de:dead"));
  said = train_view_says (context);
  g_assert_true (g_str_has_prefix (said, "CPU: "));
  g_assert_nonnull (strstr (said, "Not on a GPU: "));
  g_assert_nonnull (strstr (said, "10de:dead"));
  g_clear_object (&context);
  window = GTK_WIDGET (dc_preferences_window_new (settings));
  gtk_window_present (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  row = ADW_COMBO_ROW (dc_test_find_descendant (window, is_combo_titled,
                                                (gpointer) "Compute backend"));
  g_assert_cmpint (adw_combo_row_get_selected (row), ==, find_item (row, "10de:dead (not found)"));
  assert_setting (settings, "vulkan-device", "10de:dead");

  /* Automatic clears the device. */
  adw_combo_row_set_selected (row, 0);
  assert_setting (settings, "backend", "auto");
  assert_setting (settings, "vulkan-device", "");
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
  g_test_add_func ("/dc/ui/preferences/signal-url", test_signal_url);
  g_test_add_func ("/dc/ui/preferences/backend-choice", test_backend_choice);
  g_test_add_func ("/dc/ui/preferences/gradient-wire", test_gradient_wire);

  return g_test_run ();
}
