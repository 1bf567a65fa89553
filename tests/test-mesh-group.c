/* test-mesh-group.c: DcGroup's checks of what the user typed (suite core).
 *
 * No network: every call here fails or returns before anything is opened.
 * The group's network behaviour is covered by test-mesh-join (the CLI runs
 * on DcGroup) and test-ui-group (the application).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "dc-test-utils.h"
#include "mesh/dc-group.h"

static DcGroup *
group_new (void)
{
  g_auto(DcMeshConfig) config = { 0 };

  config.create = TRUE;
  config.hello = dc_mesh_hello_new ("unit", "cpu", "", 0);
  return dc_group_new (&config);
}

typedef struct
{
  guint notified;
} Counter;

static void
notify_cb (GObject    *object,
           GParamSpec *pspec,
           gpointer    user_data)
{
  ((Counter *) user_data)->notified++;
}

static void
test_initial (void)
{
  g_autoptr(DcGroup) group = group_new ();
  g_autoptr(GListModel) peers = NULL;
  DcGroupState state;
  gboolean is_host;

  g_assert_cmpint (dc_group_get_state (group), ==, DC_GROUP_STATE_OFFLINE);
  g_assert_false (dc_group_get_is_host (group));
  g_assert_cmpuint (dc_group_get_n_peers (group), ==, 0);
  g_assert_null (dc_group_get_room_code (group));
  g_assert_null (dc_group_get_signal_url (group));
  g_assert_null (dc_group_get_mesh (group));
  g_assert_cmpstr (dc_group_get_name (group), ==, "unit");
  g_assert_true (g_list_model_get_item_type (dc_group_get_peers (group)) == DC_TYPE_PEER);
  g_assert_cmpuint (g_list_model_get_n_items (dc_group_get_peers (group)), ==, 0);
  g_object_get (group, "state", &state, "is-host", &is_host, "peers", &peers, NULL);
  g_assert_cmpint (state, ==, DC_GROUP_STATE_OFFLINE);
  g_assert_false (is_host);
  g_assert_true (peers == dc_group_get_peers (group));
}

/* Bad input fails with a message and changes nothing; no notify fires. */
static void
test_bad_input (void)
{
  g_autoptr(DcGroup) group = group_new ();
  const char *bad_urls[] = {
    "", "   ", "http://127.0.0.1:1/signal", "127.0.0.1:1", "ws://", "not a url", "ws:/x",
  };
  const char *bad_codes[] = { NULL, "", "  \t ", "\xff\xfe" };
  Counter counter = { 0 };

  g_signal_connect (group, "notify", G_CALLBACK (notify_cb), &counter);
  for (guint i = 0; i < G_N_ELEMENTS (bad_urls); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_false (dc_group_join_room (group, bad_urls[i], "CODE", &error));
      g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "ws://"));
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad_codes); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_false (dc_group_join_room (group, "ws://127.0.0.1:1/signal", bad_codes[i],
                                          &error));
      g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
    }
  g_assert_cmpuint (counter.notified, ==, 0);
  g_assert_cmpint (dc_group_get_state (group), ==, DC_GROUP_STATE_OFFLINE);
  g_assert_null (dc_group_get_mesh (group));

  /* Leaving while offline is harmless and stays quiet. */
  dc_group_leave (group);
  dc_group_answer_request (group, "nobody", TRUE);
  g_assert_cmpuint (counter.notified, ==, 0);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/mesh/group/initial", test_initial);
  g_test_add_func ("/dc/mesh/group/bad-input", test_bad_input);

  return g_test_run ();
}
