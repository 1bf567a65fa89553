/* fuzz-mesh-ring.c: libFuzzer target for the inference ring's body decoders.
 *
 * The first byte picks the message type (offer, assign, ready, hop, token,
 * fetch, bytes, file fetch, file),
 * the rest is its body. Whatever decodes is encoded again and must decode to
 * the same values (the encoders and decoders agree on every accepted body).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "mesh/dc-mesh-ring-protocol.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  static const guint types[] = {
    DC_MESH_MSG_RING_OFFER, DC_MESH_MSG_RING_ASSIGN, DC_MESH_MSG_RING_READY,
    DC_MESH_MSG_RING_HOP, DC_MESH_MSG_RING_TOKEN, DC_MESH_MSG_RING_FETCH,
    DC_MESH_MSG_RING_BYTES, DC_MESH_MSG_RING_FILE_FETCH, DC_MESH_MSG_RING_FILE,
  };
  g_autoptr(GBytes) body = NULL;
  g_autoptr(GError) error = NULL;

  if (size < 1)
    return 0;
  body = g_bytes_new (data + 1, size - 1);
  if (!dc_mesh_message_check_payload (types[data[0] % G_N_ELEMENTS (types)], size - 1, NULL))
    return 0;
  switch (data[0] % G_N_ELEMENTS (types))
    {
    case 0:
      {
        DcMeshRingOffer a, b;

        if (dc_mesh_ring_offer_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_offer_encode (&a);

            g_assert (dc_mesh_ring_offer_decode (again, &b, NULL));
            g_assert (a.memory_bytes == b.memory_bytes && a.gmacs == b.gmacs);
          }
      }
      break;
    case 1:
      {
        g_auto(DcMeshRingAssign) a = { { 0 } };
        g_auto(DcMeshRingAssign) b = { { 0 } };

        if (dc_mesh_ring_assign_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_assign_encode (&a);

            g_assert (dc_mesh_ring_assign_decode (again, &b, NULL));
            g_assert (g_str_equal (a.model, b.model) && g_str_equal (a.next, b.next));
            g_assert (a.first <= a.last && a.stage < a.n_stages);
          }
      }
      break;
    case 2:
      {
        g_auto(DcMeshRingReady) a = { { 0 } };
        g_auto(DcMeshRingReady) b = { { 0 } };

        if (dc_mesh_ring_ready_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_ready_encode (&a);

            g_assert (dc_mesh_ring_ready_decode (again, &b, NULL));
            g_assert (g_str_equal (a.message, b.message) && a.ok == b.ok);
          }
      }
      break;
    case 3:
      {
        g_auto(DcMeshRingHop) a = { { 0 } };
        g_auto(DcMeshRingHop) b = { { 0 } };

        if (dc_mesh_ring_hop_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_hop_encode (&a);

            g_assert (dc_mesh_ring_hop_decode (again, &b, NULL));
            g_assert (a.n == b.n && a.width == b.width);
            g_assert (memcmp (a.data, b.data, (gsize) a.n * a.width * 4) == 0);
          }
      }
      break;
    case 4:
      {
        g_auto(DcMeshRingToken) a = { { 0 } };
        g_auto(DcMeshRingToken) b = { { 0 } };

        if (dc_mesh_ring_token_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_token_encode (&a);

            g_assert (dc_mesh_ring_token_decode (again, &b, NULL));
            g_assert (g_str_equal (a.text, b.text) && a.id == b.id);
          }
      }
      break;
    case 5:
      {
        g_auto(DcMeshRingFetch) a = { { 0 } };
        g_auto(DcMeshRingFetch) b = { { 0 } };

        if (dc_mesh_ring_fetch_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_fetch_encode (&a);

            g_assert (dc_mesh_ring_fetch_decode (again, &b, NULL));
            g_assert (g_str_equal (a.file, b.file) && a.offset == b.offset);
            g_assert (a.length >= 1 && a.length <= DC_MESH_RING_CHUNK_MAX);
          }
      }
      break;
    case 7:
      {
        g_auto(DcMeshRingFileFetch) a = { { 0 } };
        g_auto(DcMeshRingFileFetch) b = { { 0 } };

        if (dc_mesh_ring_file_fetch_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_file_fetch_encode (&a);

            g_assert (dc_mesh_ring_file_fetch_decode (again, &b, NULL));
            g_assert (g_str_equal (a.name, b.name) && a.offset == b.offset && a.kind == b.kind);
            g_assert (a.length >= 1 && a.length <= DC_MESH_RING_CHUNK_MAX);
            g_assert (a.offset < DC_MESH_RING_FILE_TOTAL_MAX);
          }
      }
      break;
    case 8:
      {
        g_auto(DcMeshRingFile) a = { { 0 } };
        g_auto(DcMeshRingFile) b = { { 0 } };

        if (dc_mesh_ring_file_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_file_encode (&a);

            g_assert (dc_mesh_ring_file_decode (again, &b, NULL));
            g_assert (g_str_equal (a.message, b.message) && a.offset == b.offset);
            g_assert (a.total == b.total && a.file_size == b.file_size);
            g_assert ((a.data == NULL) == (b.data == NULL));
            g_assert (a.data == NULL || g_bytes_equal (a.data, b.data));
            g_assert (a.total <= DC_MESH_RING_FILE_TOTAL_MAX);
            g_assert (a.data == NULL || a.offset + g_bytes_get_size (a.data) <= a.total);
          }
      }
      break;
    default:
      {
        g_auto(DcMeshRingBytes) a = { { 0 } };
        g_auto(DcMeshRingBytes) b = { { 0 } };

        if (dc_mesh_ring_bytes_decode (body, &a, &error))
          {
            g_autoptr(GBytes) again = dc_mesh_ring_bytes_encode (&a);

            g_assert (dc_mesh_ring_bytes_decode (again, &b, NULL));
            g_assert (g_str_equal (a.message, b.message) && a.offset == b.offset);
            g_assert ((a.data == NULL) == (b.data == NULL));
            g_assert (a.data == NULL || g_bytes_equal (a.data, b.data));
            g_assert (a.data == NULL || *a.message == '\0');
          }
      }
      break;
    }
  return 0;
}
