/* test-mesh-send.c: a chunked object sent to every peer of a mesh (suite net).
 *
 * One process: a signaling service on 127.0.0.1 and three DcMesh devices in
 * one room (ICE on 127.0.0.1 only). The host sends a 5 MB gradient with
 * dc_mesh_send_object(); both others receive every chunk in index order and
 * reassemble the object byte for byte (hash checked).
 *
 * Then dc_mesh_flush () from the host returns once both answered its ping.
 *
 * /slow-sending: the same with receivers that hold their first credits
 * (DC_TEST_CREDIT_HOLD): the host reports slow sending to each of them, then
 * its end (src/mesh/dc-send-pace.c), and counts the episodes.
 *
 * /renewal: receivers that hold their first 40 credits (10 s of slow
 * sending on the first connection): the host replaces each connection with a
 * new one mid-transfer (DcMesh's renewal), the frames not yet sent move to
 * it, and every chunk still arrives once and in order; no peer leaves, a
 * second object goes on the new connections, the old connections are
 * finalized while the meshes run (retired: closed in the background), the
 * flush answers.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <gst/gst.h>
#include <string.h>

#include "dc-test-utils.h"
#include "mesh/dc-mesh.h"
#include "mesh/dc-mesh-error.h"
#include "mesh/dc-room.h"
#include "mesh/dc-signal-server.h"
#include "mesh/dc-gst-quirks.h"

#define N_DEVICES 3

typedef struct
{
  DcMesh               *mesh;
  gboolean              joined;
  gboolean              failed;
  DcMeshChunkAssembler *assembler;
  GBytes               *object;
  guint                 next_index;
  guint                 faults;
  guint                 slow_events;       /* "slow-sending" */
  guint                 recovered_events;  /* "sending-recovered", after one */
  guint                 bad_events;        /* either, out of order or without a line */
  guint                 renewing_events;   /* "renewing" */
  guint                 renewed_events;    /* "renewed" */
  guint                 renewal_failed;    /* "renewal-failed" */
  guint                 left_events;       /* "peer-left" */
} Device;

static void
event_cb (DcMesh     *mesh,
          const char *event,
          const char *peer,
          guint       n_peers,
          const char *reason,
          gpointer    user_data)
{
  Device *device = user_data;

  if (g_str_equal (event, "joined"))
    device->joined = TRUE;
  else if (g_str_equal (event, "renewing") || g_str_equal (event, "renewed")
           || g_str_equal (event, "renewal-failed") || g_str_equal (event, "peer-left"))
    {
      g_test_message ("%s: %s: %s", event, peer ? peer : "?", reason ? reason : "(none)");
      if (g_str_equal (event, "renewing"))
        device->renewing_events++;
      else if (g_str_equal (event, "renewed"))
        device->renewed_events++;
      else if (g_str_equal (event, "renewal-failed"))
        device->renewal_failed++;
      else
        device->left_events++;
    }
  else if (g_str_equal (event, "slow-sending"))
    {
      /* The line names the device as the mesh does. */
      g_autofree char *to = g_strdup_printf ("sending to %s at ", peer ? peer : "?");

      g_test_message ("slow-sending: %s", reason ? reason : "(none)");
      if (reason == NULL || peer == NULL || !g_str_has_prefix (reason, to)
          || strstr (reason, " MB/s for ") == NULL)
        device->bad_events++;
      device->slow_events++;
    }
  else if (g_str_equal (event, "sending-recovered"))
    {
      g_test_message ("sending-recovered: %s", reason ? reason : "(none)");
      if (reason == NULL || peer == NULL || strstr (reason, "at full speed again") == NULL
          || device->recovered_events >= device->slow_events)
        device->bad_events++;
      device->recovered_events++;
    }
}

static void
failed_cb (DcMesh       *mesh,
           const GError *error,
           gpointer      user_data)
{
  Device *device = user_data;

  g_test_message ("mesh failed: %s", error->message);
  device->failed = TRUE;
}

static void
message_cb (DcMesh  *mesh,
            DcPeer  *peer,
            guint    type,
            GBytes  *payload,
            gpointer user_data)
{
  Device *device = user_data;
  g_autoptr(GError) error = NULL;
  DcMeshChunk chunk;

  if (type != DC_MESH_MSG_GRADIENTS)
    return;
  if (!dc_mesh_chunk_decode (type, payload, &chunk, &error))
    {
      g_test_message ("chunk refused: %s", error->message);
      device->faults++;
      return;
    }
  if (chunk.index != device->next_index)
    device->faults++;
  device->next_index = chunk.index + 1;
  if (!dc_mesh_chunk_assembler_push (device->assembler, &chunk, &device->object, &error))
    {
      g_test_message ("chunk refused: %s", error->message);
      device->faults++;
    }
  dc_mesh_chunk_clear (&chunk);
}

static DcMesh *
start_mesh (Device     *device,
            const char *url,
            const char *room,
            const char *name,
            gboolean    host)
{
  g_auto(DcMeshConfig) config = { 0 };
  const char *loopback[] = { "127.0.0.1", NULL };
  DcMesh *mesh;

  config.signal_url = g_strdup (url);
  config.room_code = g_strdup (room);
  config.create = host;
  config.approve = DC_MESH_APPROVE_ALL;
  config.hello = dc_mesh_hello_new (name, "cpu", "", 0);
  config.peer.ice_addresses = g_strdupv ((char **) loopback);
  mesh = dc_mesh_new (&config);
  g_signal_connect (mesh, "event", G_CALLBACK (event_cb), device);
  g_signal_connect (mesh, "failed", G_CALLBACK (failed_cb), device);
  g_signal_connect (mesh, "message", G_CALLBACK (message_cb), device);
  dc_mesh_start (mesh);
  return mesh;
}

static gboolean
is_joined (gpointer user_data)
{
  Device *device = user_data;

  return device->joined || device->failed;
}

static gboolean
all_open (gpointer user_data)
{
  Device *devices = user_data;

  for (guint i = 0; i < N_DEVICES; i++)
    if (devices[i].failed)
      return TRUE;
  for (guint i = 0; i < N_DEVICES; i++)
    {
      g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (devices[i].mesh);
      guint open = 0;

      for (guint p = 0; p < peers->len; p++)
        if (dc_peer_get_state (g_ptr_array_index (peers, p)) == DC_PEER_STATE_OPEN
            && dc_peer_get_hello (g_ptr_array_index (peers, p)) != NULL)
          open++;
      if (open < N_DEVICES - 1)
        return FALSE;
    }
  return TRUE;
}

static void
flushed_cb (gpointer user_data)
{
  *(gint64 *) user_data = g_get_monotonic_time ();
}

static gboolean
is_flushed (gpointer user_data)
{
  return *(gint64 *) user_data != 0;
}

static gboolean
others_have_object (gpointer user_data)
{
  Device *devices = user_data;

  for (guint i = 1; i < N_DEVICES; i++)
    if (devices[i].faults > 0)
      return TRUE;
  for (guint i = 1; i < N_DEVICES; i++)
    if (devices[i].object == NULL)
      return FALSE;
  return TRUE;
}

typedef struct
{
  gpointer *slots;  /* weak pointers: NULL once finalized */
  guint     n;
} Watched;

static gboolean
all_finalized (gpointer user_data)
{
  Watched *watched = user_data;

  for (guint i = 0; i < watched->n; i++)
    if (watched->slots[i] != NULL)
      return FALSE;
  return TRUE;
}

static gboolean
all_renewed (gpointer user_data)
{
  Device *devices = user_data;

  for (guint i = 0; i < N_DEVICES; i++)
    if (devices[i].failed || devices[i].renewal_failed > 0)
      return TRUE;
  if (devices[0].renewed_events < N_DEVICES - 1)
    return FALSE;
  for (guint i = 1; i < N_DEVICES; i++)
    if (devices[i].renewed_events < 1)
      return FALSE;
  return TRUE;
}

/* The host sends a 5 MB object to the two others; @hold: the others'
 * DC_TEST_CREDIT_HOLD, or NULL; @renewal: a renewal of each connection is
 * expected, and a second object then goes on the new ones. */
static void
send_to_all (const char *hold,
             gboolean    renewal)
{
  g_autoptr(DcSignalServer) server = dc_signal_server_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  g_autofree char *room = dc_room_generate_code ();
  g_autoptr(GBytes) object = NULL, empty = g_bytes_new (NULL, 0);
  Device devices[N_DEVICES] = { { 0 } };
  const gsize size = 5 * 1000 * 1000 + 3;
  guint8 *data = g_malloc (size);
  DcMeshChunk info;
  guint n_peers = 0;
  g_autoptr(GPtrArray) first_peers = NULL;

  if (!dc_mesh_check_plugins (&error))
    {
      g_test_skip (error->message);
      g_free (data);
      return;
    }
  g_assert_true (dc_signal_server_listen (server, "127.0.0.1", 0, NULL, NULL, &error));
  g_assert_no_error (error);
  url = dc_signal_server_dup_url (server);

  for (gsize k = 0; k < size; k++)
    data[k] = (guint8) ((k * 2654435761u) >> 9);
  object = g_bytes_new_take (data, size);

  /* The host first, so that the others find the room. */
  for (guint i = 0; i < N_DEVICES; i++)
    {
      g_autofree char *name = g_strdup_printf ("device-%u", i);

      devices[i].assembler = dc_mesh_chunk_assembler_new (DC_MESH_MSG_GRADIENTS, size);
      /* Read when each peer is made: the host's peers never hold theirs. */
      if (hold != NULL && i > 0)
        g_setenv ("DC_TEST_CREDIT_HOLD", hold, TRUE);
      else
        g_unsetenv ("DC_TEST_CREDIT_HOLD");
      devices[i].mesh = start_mesh (&devices[i], url, room, name, i == 0);
      g_assert_true (dc_test_wait_until (is_joined, &devices[i], 30000));
      g_assert_false (devices[i].failed);
    }
  g_assert_true (dc_test_wait_until (all_open, devices, 60000));
  for (guint i = 0; i < N_DEVICES; i++)
    g_assert_false (devices[i].failed);
  /* Every peer read it: a renewal's new connections hold nothing. */
  g_unsetenv ("DC_TEST_CREDIT_HOLD");
  first_peers = dc_mesh_dup_peers (devices[0].mesh);

  memset (&info, 0, sizeof info);
  memset (info.run_id, 0x33, sizeof info.run_id);
  info.step = 1;
  g_assert_true (dc_mesh_send_object (devices[0].mesh, DC_MESH_MSG_GRADIENTS, &info, object,
                                      &n_peers, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_peers, ==, N_DEVICES - 1);
  g_assert_true (dc_test_wait_until (others_have_object, devices, 60000));
  for (guint i = 1; i < N_DEVICES; i++)
    {
      g_assert_cmpuint (devices[i].faults, ==, 0);
      g_assert_cmpuint (devices[i].next_index, ==,
                        (size + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
      g_assert_true (g_bytes_equal (devices[i].object, object));
    }
  g_assert_null (devices[0].object);

  if (renewal)
    {
      g_autoptr(GPtrArray) peers = NULL;
      g_autoptr(GBytes) second = NULL;

      /* Each connection of the host was replaced once, on both sides, and
       * nobody left. */
      g_assert_true (dc_test_wait_until (all_renewed, devices, 60000));
      for (guint i = 0; i < N_DEVICES; i++)
        {
          g_assert_false (devices[i].failed);
          g_assert_cmpuint (devices[i].renewal_failed, ==, 0);
          g_assert_cmpuint (devices[i].left_events, ==, 0);
        }
      /* At least once each: a loaded machine may make a new connection
       * slow too, and 2 s later it is renewed again. */
      g_assert_cmpuint (devices[0].renewing_events, >=, N_DEVICES - 1);
      g_assert_cmpuint (devices[0].renewed_events, >=, N_DEVICES - 1);
      g_assert_cmpuint (dc_mesh_get_renewals (devices[0].mesh), ==, devices[0].renewed_events);
      for (guint i = 1; i < N_DEVICES; i++)
        {
          g_assert_cmpuint (devices[i].renewed_events, >=, 1);
          g_assert_cmpuint (dc_mesh_get_renewals (devices[i].mesh), ==,
                            devices[i].renewed_events);
        }
      g_assert_cmpuint (dc_mesh_get_n_peers (devices[0].mesh), ==, N_DEVICES - 1);
      peers = dc_mesh_dup_peers (devices[0].mesh);
      g_assert_cmpuint (peers->len, ==, N_DEVICES - 1);
      for (guint p = 0; p < peers->len; p++)
        {
          DcPeer *peer = g_ptr_array_index (peers, p);

          g_assert_cmpint (dc_peer_get_state (peer), ==, DC_PEER_STATE_OPEN);
          g_assert_false (g_ptr_array_find (first_peers, peer, NULL));
        }

      /* A second object goes on the new connections. */
      {
        guint8 *bytes = g_malloc (size);

        for (gsize k = 0; k < size; k++)
          bytes[k] = (guint8) ((k * 40503u) >> 7);
        second = g_bytes_new_take (bytes, size);
      }
      for (guint i = 1; i < N_DEVICES; i++)
        {
          dc_mesh_chunk_assembler_free (devices[i].assembler);
          devices[i].assembler = dc_mesh_chunk_assembler_new (DC_MESH_MSG_GRADIENTS, size);
          g_clear_pointer (&devices[i].object, g_bytes_unref);
          devices[i].next_index = 0;
        }
      info.step = 2;
      g_assert_true (dc_mesh_send_object (devices[0].mesh, DC_MESH_MSG_GRADIENTS, &info, second,
                                          &n_peers, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (n_peers, ==, N_DEVICES - 1);
      g_assert_true (dc_test_wait_until (others_have_object, devices, 60000));
      for (guint i = 1; i < N_DEVICES; i++)
        {
          g_assert_cmpuint (devices[i].faults, ==, 0);
          g_assert_true (g_bytes_equal (devices[i].object, second));
          g_assert_cmpuint (devices[i].left_events, ==, 0);
        }

      /* The host's first connections were retired (_dc_mesh_retire ()):
       * each is finalized while the meshes run, its close over, not kept
       * with its pipeline until the mesh ends. */
      {
        Watched watched = { g_new0 (gpointer, first_peers->len), first_peers->len };
        gboolean finalized;

        for (guint p = 0; p < watched.n; p++)
          {
            watched.slots[p] = g_ptr_array_index (first_peers, p);
            g_object_add_weak_pointer (watched.slots[p], &watched.slots[p]);
          }
        g_clear_pointer (&first_peers, g_ptr_array_unref);
        finalized = dc_test_wait_until (all_finalized, &watched, 10000);
        for (guint p = 0; p < watched.n; p++)
          if (watched.slots[p] != NULL)
            g_object_remove_weak_pointer (watched.slots[p], &watched.slots[p]);
        g_free (watched.slots);
        g_assert_true (finalized);
      }
    }

  /* Slow sending: on the host only (the receivers send nothing but
   * credits and heartbeats). With held credits, to each receiver (one
   * episode each told); without, none is expected, but a loaded machine
   * may move 5 MB slower than 5 MB/s for 300 ms (seen in CI), which is
   * slow sending indeed: only the events' form is checked then. */
  {
    guint episodes = 0;
    gint64 slow_us = 0;

    dc_mesh_get_slow_sending (devices[0].mesh, &episodes, &slow_us);
    g_test_message ("host: %u episodes of slow sending, %" G_GINT64_FORMAT " µs; %u told, "
                    "%u ended", episodes, slow_us, devices[0].slow_events,
                    devices[0].recovered_events);
    for (guint i = 0; i < N_DEVICES; i++)
      {
        g_assert_cmpuint (devices[i].bad_events, ==, 0);
        g_assert_cmpuint (devices[i].recovered_events, <=, devices[i].slow_events);
      }
    for (guint i = 1; i < N_DEVICES; i++)
      g_assert_cmpuint (devices[i].slow_events, ==, 0);
    /* One told per peer at most in 10 s. */
    g_assert_cmpuint (devices[0].slow_events, <=, N_DEVICES - 1);
    g_assert_cmpuint (devices[0].slow_events, <=, episodes);
    if (hold != NULL)
      {
        /* Each receiver's held credits alone make an episode of 3 slow
         * intervals or more (750 ms); whether a fast one ended it before
         * the object was through depends on the machine's load. */
        g_assert_cmpuint (devices[0].slow_events, ==, N_DEVICES - 1);
        g_assert_cmpuint (episodes, >=, N_DEVICES - 1);
        g_assert_cmpint (slow_us, >=, (N_DEVICES - 1) * 300000);
      }
  }

  /* dc_mesh_flush (): both others answer the host's ping, long before its
   * 60 s bound (which a PONG not matched would wait out). */
  {
    gint64 began = g_get_monotonic_time ();
    gint64 flushed = 0;

    dc_mesh_flush (devices[0].mesh, 60000, flushed_cb, &flushed);
    g_assert_true (dc_test_wait_until (is_flushed, &flushed, 90000));
    g_test_message ("flushed in %" G_GINT64_FORMAT " µs", flushed - began);
    g_assert_cmpint (flushed - began, <, 30 * G_USEC_PER_SEC);
  }

  /* An object that cannot be chunked is refused before anything is queued. */
  g_assert_false (dc_mesh_send_object (devices[0].mesh, DC_MESH_MSG_GRADIENTS, &info, empty,
                                       &n_peers, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_assert_cmpuint (n_peers, ==, 0);

  for (guint i = N_DEVICES; i-- > 0;)
    {
      dc_mesh_leave (devices[i].mesh);
      g_signal_handlers_disconnect_by_data (devices[i].mesh, &devices[i]);
      g_clear_object (&devices[i].mesh);
      dc_mesh_chunk_assembler_free (devices[i].assembler);
      g_clear_pointer (&devices[i].object, g_bytes_unref);
    }
}

static void
test_send_to_all (void)
{
  send_to_all (NULL, FALSE);
}

/* Each receiver holds its first 4 credits 250 ms and acknowledges one step
 * with each: its sender's bytes move at about 1 MB/s with two steps or
 * more in flight for a second, then at loopback speed. */
static void
test_slow_sending (void)
{
  send_to_all ("250:4", FALSE);
}

/* Each receiver holds its first 40 credits 250 ms: about 1 MB/s for 10 s
 * on the first connections, so the host replaces them mid-transfer. */
static void
test_renewal (void)
{
  send_to_all ("250:40", TRUE);
}

int
main (int    argc,
      char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);

  /* Peers stop in these cases' process: GStreamer 1.22's sctp teardown
   * warning (each case installs its quirk: g_test_run () clears it). */
  dc_gst_quirks_add_test ("/dc/mesh/send/object-to-all", test_send_to_all);
  dc_gst_quirks_add_test ("/dc/mesh/send/slow-sending", test_slow_sending);
  dc_gst_quirks_add_test ("/dc/mesh/send/renewal", test_renewal);

  return g_test_run ();
}
