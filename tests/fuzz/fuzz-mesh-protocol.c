/* fuzz-mesh-protocol.c: libFuzzer target for the peer wire decoder.
 *
 * The input is split into pieces by a leading length byte pair per piece, so
 * the fuzzer explores reassembly across pieces as well as single frames; every
 * complete message is then handed to the typed body decoders.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "mesh/dc-mesh-protocol.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

static void
decode_body (DcMeshMessage *message)
{
  g_autoptr(GError) error = NULL;

  switch (message->type)
    {
    case DC_MESH_MSG_HELLO:
      {
        g_autoptr(DcMeshHello) hello = dc_mesh_hello_decode (message->payload, &error);
      }
      break;
    case DC_MESH_MSG_STEP_REPORT:
      {
        DcMeshStepReport report;

        dc_mesh_step_report_decode (message->payload, &report, &error);
      }
      break;
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_WEIGHTS:
    case DC_MESH_MSG_CHECKPOINT:
    case DC_MESH_MSG_ACTIVATIONS:
      {
        DcMeshBulkHeader header;
        GBytes *bytes = NULL;

        if (dc_mesh_bulk_decode (message->payload, &header, &bytes, &error))
          g_bytes_unref (bytes);
      }
      break;
    default:
      break;
    }
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();

  while (size >= 2)
    {
      gsize n = MIN ((gsize) (data[0] | (data[1] << 8)) + 1, size - 2);
      g_autoptr(GError) error = NULL;
      g_autoptr(DcMeshMessage) message = NULL;

      message = dc_mesh_reader_push (reader, data + 2, n, &error);
      if (message != NULL)
        decode_body (message);
      data += 2 + n;
      size -= 2 + n;
    }
  return 0;
}
