/* dc-train-group-stream.c: the streamed reduce (issue 11's exchange tail).
 *
 * A reducer sums its shard and sends the summed shard chunk by chunk as
 * the contributions come, instead of once every contribution is whole:
 * summed chunk k needs only chunk k of every contribution (the two objects
 * have the same 32-byte header and element type, so chunk k of either
 * holds the same values; the summed shard's contribution hashes follow its
 * values, docs/PROTOCOL.md), so the hop to the reducer, the sum and the hop
 * to the others overlap. The sums are the same element by element (the
 * canonical order is per element), and the hashes the same bytes hashed
 * in the same order, so nothing a receiver, an audit or a repair sees
 * differs from a whole reduce: only when it comes (docs/ARCHITECTURE.md,
 * "The streamed reduce").
 *
 * The main thread feeds the stream (each contribution chunk to this
 * device's shard as it is assembled, each whole contribution as it is
 * kept: its own, one that came whole, a repaired one); a thread of the
 * stream's own sums, hashes, cuts and frames chunk k as soon as every
 * contribution's chunks up to k are in, and hands the frames to the main
 * thread, which queues them to every roster device. A contribution's last
 * chunk is fed only with its whole object (the assembler has checked the
 * object's hash by then), so the summed shard's last chunk, which carries
 * the object hash, never goes out with a contribution that was not whole
 * and checked; a whole object that differs from the chunks already summed
 * (a sender that lied about its chunks) breaks the stream, and the whole
 * reduce of before takes over (a receiver drops the partial object when
 * chunk 0 comes again).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include <string.h>

#include "dc-sha256.h"
#include "dc-train-group-private.h"
#include "model/dc-gpt-trainer.h"

struct _DcTrainStream
{
  gatomicrefcount ref;
  GMutex        lock;
  GCond         cond;
  /* Fixed when made (main thread). */
  guint         id;            /* self->stream_id at creation */
  guint         n;
  guint         rank;
  guint64       step;
  guint64       digest;
  DcTrainWire   wire;          /* the run's, received and sent alike */
  gboolean      compress;      /* the chunks' data zstd-compressed (the run's CONFIG) */
  guint64       fault_corrupt_sum;
  guint8        run_id[DC_MESH_RUN_ID_SIZE];
  gsize         length;        /* values of this device's shard */
  guint64       total_c;       /* a contribution's wire bytes */
  guint64       total_s;       /* the summed shard's */
  guint         count_c;       /* their chunk counts */
  guint         count_s;
  GMainContext *context;
  GWeakRef      owner;         /* the group: the thread holds no reference */
  /* Under lock. */
  GBytes      **pieces;        /* n × count_c: float32 values of chunk j of contribution i */
  guint        *have;          /* n: chunks in a row from 0 */
  float        *loss;          /* n: each contribution's loss (known once have > 0) */
  gboolean      started;       /* the thread runs */
  gboolean      cancelled;     /* dropped: the thread stops */
  gboolean      broken;        /* a whole object differed from its chunks */
  gboolean      finished;      /* every chunk made; result set */
  GQueue        out;           /* StreamOut: chunks made, for the main thread */
  GBytes       *result;        /* the float32 summed shard object, kept */
  float         result_loss;
  GError       *error;         /* why a chunk could not be made */
  /* Main thread only. */
  guint        *next;          /* n: the next chunk index expected of each sender, 0: none */
  gboolean     *whole;         /* n: fed whole */
  GQueue       *held;          /* n: frames held for each peer (DC_TRAIN_GROUP_STREAM=hold) */
  guint         sent;          /* chunks queued to the peers */
  guint         early;         /* … before every contribution was whole */
  guint         n_pieces;      /* contribution chunks fed one by one */
  gboolean      began_traced;
};

typedef struct
{
  guint      index;
  GPtrArray *frames;           /* one chunk, framed */
} StreamOut;

static void
stream_out_free (gpointer data)
{
  StreamOut *out = data;

  g_clear_pointer (&out->frames, g_ptr_array_unref);
  g_free (out);
}

static DcTrainStream *
stream_ref (DcTrainStream *st)
{
  g_atomic_ref_count_inc (&st->ref);
  return st;
}

static void
stream_unref (DcTrainStream *st)
{
  if (!g_atomic_ref_count_dec (&st->ref))
    return;
  for (guint i = 0; i < st->n * st->count_c; i++)
    g_clear_pointer (&st->pieces[i], g_bytes_unref);
  g_free (st->pieces);
  g_free (st->have);
  g_free (st->loss);
  g_free (st->next);
  g_free (st->whole);
  for (guint i = 0; i < st->n; i++)
    g_queue_clear_full (&st->held[i], (GDestroyNotify) g_ptr_array_unref);
  g_free (st->held);
  g_queue_clear_full (&st->out, stream_out_free);
  g_clear_pointer (&st->result, g_bytes_unref);
  g_clear_error (&st->error);
  g_main_context_unref (st->context);
  g_weak_ref_clear (&st->owner);
  g_mutex_clear (&st->lock);
  g_cond_clear (&st->cond);
  g_free (st);
}

/* [start, end) of the values in chunk @j of an object whose values begin
 * after the 32-byte header (a contribution, or a summed shard's values:
 * the same for both, the hashes come after). */
static void
chunk_values (const DcTrainStream *st,
              guint                j,
              gsize               *start,
              gsize               *end)
{
  guint64 a = (guint64) j * DC_MESH_CHUNK_DATA_MAX;
  guint64 b = a + DC_MESH_CHUNK_DATA_MAX;

  a = MAX (a, (guint64) DC_TRAIN_SHARD_HEADER_SIZE);
  b = MIN (b, st->total_c);
  if (b <= a)
    {
      *start = *end = st->length;
      return;
    }
  /* A chunk boundary is a value's (an int8 block's) boundary. */
  *start = dc_train_wire_values_before (st->wire, st->length, a - DC_TRAIN_SHARD_HEADER_SIZE);
  *end = dc_train_wire_values_before (st->wire, st->length, b - DC_TRAIN_SHARD_HEADER_SIZE);
}

/* DC_TRAIN_GROUP_STREAM: 0 sums whole; "hold" streams, but holds a chunk
 * for a peer back until this device's contribution to that peer is queued
 * (_dc_train_group_stream_release ()); anything else (the default) streams. */
enum { MODE_OFF = 1, MODE_ON, MODE_HOLD };

static gsize
stream_mode (void)
{
  static gsize mode = 0;

  if (g_once_init_enter (&mode))
    {
      const char *env = g_getenv ("DC_TRAIN_GROUP_STREAM");

      g_once_init_leave (&mode, g_strcmp0 (env, "0") == 0 ? MODE_OFF
                                : g_strcmp0 (env, "hold") == 0 ? MODE_HOLD : MODE_ON);
    }
  return mode;
}

/**
 * _dc_train_group_stream_wanted:
 *
 * Whether this step's reduce streams: on unless DC_TRAIN_GROUP_STREAM=0,
 * in a group of two or more, and not on a step whose summed shard a test
 * fault sends otherwise (corrupt-chunk, partial-send), nor with the
 * wire-f32 fault (the chunks of a contribution and of the sum must hold the
 * same values).
 */
gboolean
_dc_train_group_stream_wanted (DcTrainGroup *self,
                               guint64       step)
{
  return stream_mode () != MODE_OFF && self->session != NULL && self->roster != NULL
         && self->roster->len >= 2 && self->rank < self->roster->len
         && _dc_train_group_send_wire (self) == _dc_train_group_wire (self)
         && self->fault_chunk != step && self->fault_partial != step
         && self->stream_off_step != step;
}

/* The stream of this step and roster, made if there is none (or one of
 * another step or roster, dropped). NULL when this step does not stream. */
static DcTrainStream *
get_stream (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint64 step = self->step_done + 1;
  DcTrainShardLayout layout;
  DcTrainStream *st = self->stream;
  gsize start;
  guint n;

  if ((self->state != STATE_COMPUTING && self->state != STATE_EXCHANGING)
      || !_dc_train_group_stream_wanted (self, step))
    return NULL;
  n = self->roster->len;
  if (st != NULL && st->step == step && st->digest == self->digest && st->n == n
      && st->rank == self->rank)
    return st;
  _dc_train_group_stream_drop (self);
  st = g_new0 (DcTrainStream, 1);
  g_atomic_ref_count_init (&st->ref);
  g_mutex_init (&st->lock);
  g_cond_init (&st->cond);
  st->id = ++self->stream_id;
  st->n = n;
  st->rank = self->rank;
  st->step = step;
  st->digest = self->digest;
  st->wire = _dc_train_group_wire (self);
  st->compress = _dc_train_group_compress (self);
  st->fault_corrupt_sum = self->fault_corrupt_sum;
  memcpy (st->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  _dc_train_group_layout (model, &layout);
  dc_train_shard_range (&layout, n, self->rank, &start, &st->length);
  st->total_c = dc_train_shard_wire_size (DC_TRAIN_SHARD_CONTRIBUTION, st->wire, &layout, n,
                                          self->rank);
  st->total_s = dc_train_shard_wire_size (DC_TRAIN_SHARD_SUMMED, st->wire, &layout, n,
                                          self->rank);
  st->count_c = (guint) ((st->total_c + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
  st->count_s = (guint) ((st->total_s + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
  st->context = g_main_context_ref_thread_default ();
  g_weak_ref_init (&st->owner, self);
  st->pieces = g_new0 (GBytes *, (gsize) n * st->count_c);
  st->have = g_new0 (guint, n);
  st->loss = g_new0 (float, n);
  st->next = g_new0 (guint, n);
  st->whole = g_new0 (gboolean, n);
  st->held = g_new0 (GQueue, n);
  g_queue_init (&st->out);
  self->stream = st;
  /* What is whole already (its own once sent, contributions that came
   * before this step's first streamed chunk). */
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *key = _dc_train_group_contrib_key (step, self->digest,
                                                          g_ptr_array_index (self->roster, i),
                                                          self->rank);
      Gradient *contribution = g_hash_table_lookup (self->contribs, key);

      if (contribution != NULL && contribution->rank == i)
        _dc_train_group_stream_object (self, i, contribution->object);
    }
  return self->stream;
}

/* Chunk @j of contribution @i is here (under lock): counts it, wakes the
 * thread. */
static void
add_piece (DcTrainStream *st,
           guint          i,
           guint          j,
           GBytes        *values)
{
  g_clear_pointer (&st->pieces[(gsize) i * st->count_c + j], g_bytes_unref);
  st->pieces[(gsize) i * st->count_c + j] = values;
  while (st->have[i] < st->count_c && st->pieces[(gsize) i * st->count_c + st->have[i]] != NULL)
    st->have[i]++;
  g_cond_broadcast (&st->cond);
}

/**
 * _dc_train_group_stream_chunk:
 * @rank: the sender's rank in this device's roster
 * @chunk: a GRADIENTS chunk from it, checked and taken by the sender's
 *   assembler, not the last of its object
 *
 * Feeds the stream with chunk k of a contribution to this device's shard
 * of the step being taken: chunk 0 says (its header) whether it is one; the
 * sender's later chunks follow in order (one ordered channel; a sender
 * queues every contribution before its own summed shard). Anything else is
 * left to the whole object.
 */
void
_dc_train_group_stream_chunk (DcTrainGroup      *self,
                              guint              rank,
                              const DcMeshChunk *chunk)
{
  DcTrainStream *st;
  gsize size, start, end;
  const guint8 *data;
  gsize skip = 0;
  float *values;

  if (chunk->data == NULL || chunk->step != self->step_done + 1
      || (st = get_stream (self)) == NULL || rank >= st->n || rank == st->rank
      || st->whole[rank] || chunk->total != st->total_c || chunk->count != st->count_c
      || chunk->index + 1 >= st->count_c)
    return;
  data = g_bytes_get_data (chunk->data, &size);
  if (chunk->index == 0)
    {
      DcTrainShardHeader header;

      st->next[rank] = 0;
      if (!dc_train_shard_header_read (data, size, &header, NULL)
          || header.kind != DC_TRAIN_SHARD_CONTRIBUTION || header.wire != st->wire
          || header.roster_size != st->n || header.shard != st->rank
          || header.digest != st->digest)
        return;
      skip = DC_TRAIN_SHARD_HEADER_SIZE;
      g_mutex_lock (&st->lock);
      memcpy (&st->loss[rank], &header.loss_bits, 4);
      g_mutex_unlock (&st->lock);
    }
  else if (st->next[rank] != chunk->index)
    {
      st->next[rank] = 0;
      return;
    }
  chunk_values (st, chunk->index, &start, &end);
  values = g_new (float, MAX (end - start, 1));
  /* The wrong size, a malformed int8 block, a NaN or an infinity: the
   * whole object is refused (its decode), and this contribution comes
   * again whole or not at all. */
  if (!dc_train_wire_unpack (st->wire, data + skip, size - skip, start, values, end - start))
    {
      g_free (values);
      st->next[rank] = 0;
      return;
    }
  st->next[rank] = chunk->index + 1;
  st->n_pieces++;
  g_mutex_lock (&st->lock);
  add_piece (st, rank, chunk->index,
             g_bytes_new_take (values, (end - start) * sizeof (float)));
  g_mutex_unlock (&st->lock);
}

/**
 * _dc_train_group_stream_object:
 * @rank: its author's rank
 * @object: a whole float32 contribution to this device's shard of the
 *   step being taken, for this roster, kept in contribs
 *
 * Feeds the stream with a whole contribution: the chunks not streamed yet
 * are taken from it, those streamed are compared with it (a difference
 * breaks the stream: maybe_reduce () then sums whole).
 */
void
_dc_train_group_stream_object (DcTrainGroup *self,
                               guint         rank,
                               GBytes       *object)
{
  DcTrainStream *st = self->stream;
  gsize size;
  const guint8 *data = g_bytes_get_data (object, &size);
  float loss;

  /* Only for the stream there is (get_stream () makes it with what is
   * kept already). */
  if (st == NULL || rank >= st->n || st->whole[rank]
      || size != DC_TRAIN_SHARD_HEADER_SIZE + st->length * sizeof (float))
    return;
  st->whole[rank] = TRUE;
  st->next[rank] = 0;
  memcpy (&loss, data + 24, 4);
  g_mutex_lock (&st->lock);
  st->loss[rank] = loss;
  for (guint j = 0; j < st->count_c; j++)
    {
      GBytes *piece = st->pieces[(gsize) rank * st->count_c + j];
      gsize start, end;

      chunk_values (st, j, &start, &end);
      if (piece != NULL)
        {
          if (memcmp (g_bytes_get_data (piece, NULL),
                      data + DC_TRAIN_SHARD_HEADER_SIZE + start * sizeof (float),
                      (end - start) * sizeof (float)) != 0)
            {
              g_message ("the contribution of rank %u to this device's shard of step %"
                         G_GUINT64_FORMAT " differs from the chunks of it already summed: "
                         "summed again whole", rank, st->step);
              st->broken = TRUE;
              g_cond_broadcast (&st->cond);
            }
          continue;
        }
      add_piece (st, rank, j,
                 g_bytes_new_from_bytes (object, DC_TRAIN_SHARD_HEADER_SIZE
                                                 + start * sizeof (float),
                                         (end - start) * sizeof (float)));
    }
  g_cond_broadcast (&st->cond);
  g_mutex_unlock (&st->lock);
}

typedef struct
{
  DcTrainGroup  *self;
  DcTrainStream *st;
} StreamNote;

static void
stream_note_free (gpointer data)
{
  StreamNote *note = data;

  g_object_unref (note->self);
  stream_unref (note->st);
  g_free (note);
}

static gboolean stream_note_cb (gpointer user_data);

/* Wakes the main thread (a source on its context, not
 * g_main_context_invoke (): shared/PLATFORM-NOTES.md). */
static void
notify (DcTrainStream *st)
{
  g_autoptr(GSource) source = NULL;
  DcTrainGroup *self = g_weak_ref_get (&st->owner);
  StreamNote *note;

  if (self == NULL)
    return;
  source = g_idle_source_new ();
  note = g_new0 (StreamNote, 1);
  note->self = self;
  note->st = stream_ref (st);
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, stream_note_cb, note, stream_note_free);
  g_source_attach (source, st->context);
}

/* The stream's thread: chunk k of the summed shard as soon as chunks 0..k
 * of every contribution are in, in order (each contribution's hash is
 * taken over its values in order). */
static gpointer
stream_thread (gpointer user_data)
{
  DcTrainStream *st = user_data;
  guint n = st->n;
  gboolean separate = st->wire != DC_TRAIN_WIRE_F32;
  gsize obj_size = DC_TRAIN_SHARD_HEADER_SIZE + st->length * sizeof (float)
                   + (gsize) n * DC_TRAIN_SHARD_HASH_SIZE;
  guint8 *object = g_malloc (obj_size);
  /* The wire bytes: the object itself in f32. */
  guint8 *wire = separate ? g_malloc ((gsize) st->total_s) : object;
  float *sum = (float *) (object + DC_TRAIN_SHARD_HEADER_SIZE);
  g_autofree DcSha256 **hashes = g_new0 (DcSha256 *, n);
  g_autofree guint8 *chunk_hashes = g_malloc ((gsize) st->count_s * DC_MESH_HASH_SIZE);
  g_autofree const float **values = g_new0 (const float *, n);
  g_autofree GBytes **held = g_new0 (GBytes *, n);
  gboolean hashed = FALSE;
  float loss = 0.0f;
  GError *error = NULL;
  guint k;

  for (guint i = 0; i < n; i++)
    hashes[i] = dc_sha256_new ();
  for (k = 0; k < st->count_s; k++)
    {
      guint need = MIN (k, st->count_c - 1);
      gsize start, end;
      guint64 a = (guint64) k * DC_MESH_CHUNK_DATA_MAX;
      guint64 b = MIN (a + DC_MESH_CHUNK_DATA_MAX, st->total_s);
      DcMeshChunk chunk = { 0 };
      g_autoptr(GBytes) body = NULL;
      g_autoptr(GBytes) slice = NULL;
      g_autoptr(GPtrArray) bodies = NULL;
      GPtrArray *frames;
      gboolean ready;

      g_mutex_lock (&st->lock);
      for (;;)
        {
          ready = TRUE;
          for (guint i = 0; i < n; i++)
            ready &= st->have[i] > need;
          if (ready || st->cancelled || st->broken)
            break;
          g_cond_wait (&st->cond, &st->lock);
        }
      if (st->cancelled || st->broken)
        {
          g_mutex_unlock (&st->lock);
          break;
        }
      chunk_values (st, k, &start, &end);
      for (guint i = 0; i < n && start < end; i++)
        {
          held[i] = g_bytes_ref (st->pieces[(gsize) i * st->count_c + k]);
          values[i] = g_bytes_get_data (held[i], NULL);
        }
      if (k == 0)
        {
          DcTrainShardHeader header = { 0 };

          /* The losses as the simulation sums them: rank order. */
          for (guint i = 0; i < n; i++)
            loss = loss + st->loss[i];
          loss = loss / (float) n;
          header.kind = DC_TRAIN_SHARD_SUMMED;
          header.wire = DC_TRAIN_WIRE_F32;
          header.roster_size = n;
          header.shard = st->rank;
          header.digest = st->digest;
          memcpy (&header.loss_bits, &loss, 4);
          dc_train_shard_header_write (object, &header);
          if (separate)
            {
              memcpy (wire, object, DC_TRAIN_SHARD_HEADER_SIZE);
              wire[5] = st->wire;
            }
        }
      g_mutex_unlock (&st->lock);

      if (start < end)
        {
          /* Two contributions at a time: interleaved chains with the SHA
           * extensions (dc_sha256_update_pair ()). */
          for (guint i = 0; i < n; i += 2)
            if (i + 1 < n)
              dc_sha256_update_pair (hashes[i], values[i], hashes[i + 1], values[i + 1],
                                     (end - start) * sizeof (float));
            else
              dc_sha256_update (hashes[i], values[i], (end - start) * sizeof (float));
          dc_gpt_trainer_combine_gradients (values, n, end - start, sum + start);
          for (guint i = 0; i < n; i++)
            g_clear_pointer (&held[i], g_bytes_unref);
          /* A bf16 or int8 run applies its own summed shard as the
           * others receive it (a mean of finite values is finite, and no
           * larger than the largest); a chunk begins a block. */
          dc_train_wire_round (st->wire, sum + start, end - start);
          /* Test only (DC_TEST_FAULT=corrupt-sum@STEP), as the whole
           * reduce does it. */
          if (st->fault_corrupt_sum != 0 && st->step >= st->fault_corrupt_sum && start == 0)
            dc_train_wire_corrupt (st->wire, sum, end - start);
          if (separate)
            dc_train_wire_pack (st->wire, sum + start, end - start, start,
                                wire + DC_TRAIN_SHARD_HEADER_SIZE
                                + dc_train_wire_value_offset (st->wire, start));
        }
      /* The chunk reaches the hashes (they follow the values): every
       * contribution is whole by now (need is its last chunk). */
      if (b > st->total_c && !hashed)
        {
          for (guint i = 0; i < n; i++)
            {
              guint8 *at = object + DC_TRAIN_SHARD_HEADER_SIZE + st->length * sizeof (float)
                           + (gsize) i * DC_TRAIN_SHARD_HASH_SIZE;

              dc_sha256_get_digest (hashes[i], at);
              if (separate)
                memcpy (wire + st->total_c + (gsize) i * DC_TRAIN_SHARD_HASH_SIZE, at,
                        DC_TRAIN_SHARD_HASH_SIZE);
            }
          hashed = TRUE;
        }
      slice = g_bytes_new_static (wire + a, (gsize) (b - a));
      dc_mesh_train_hash (slice, chunk_hashes + (gsize) k * DC_MESH_HASH_SIZE);
      memcpy (chunk.run_id, st->run_id, DC_MESH_RUN_ID_SIZE);
      chunk.step = st->step;
      chunk.rank = st->rank;
      chunk.index = k;
      chunk.count = st->count_s;
      chunk.total = st->total_s;
      /* The object's hash in the last chunk; zeros before (docs/PROTOCOL.md). */
      if (k + 1 == st->count_s)
        {
          g_autoptr(GBytes) list = g_bytes_new_static (chunk_hashes,
                                                       (gsize) st->count_s * DC_MESH_HASH_SIZE);

          dc_mesh_train_hash (list, chunk.hash);
        }
      chunk.data = slice;
      body = dc_mesh_chunk_encode (DC_MESH_MSG_GRADIENTS, &chunk, &error);
      chunk.data = NULL;
      if (body == NULL)
        break;
      bodies = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
      g_ptr_array_add (bodies, g_bytes_ref (body));
      frames = dc_mesh_chunk_frames_encode_coded (DC_MESH_MSG_GRADIENTS, bodies, st->compress,
                                                  &error);
      if (frames == NULL)
        break;
      DC_TRAIN_GROUP_TRACE ("stream_chunk step=%" G_GUINT64_FORMAT " index=%u count=%u", st->step,
                            k, st->count_s);
      {
        StreamOut *out = g_new0 (StreamOut, 1);

        out->index = k;
        out->frames = frames;
        g_mutex_lock (&st->lock);
        g_queue_push_tail (&st->out, out);
        if (k + 1 == st->count_s)
          {
            st->result = g_bytes_new_take (g_steal_pointer (&object), obj_size);
            st->result_loss = loss;
            st->finished = TRUE;
          }
        g_mutex_unlock (&st->lock);
      }
      notify (st);
    }
  for (guint i = 0; i < n; i++)
    {
      g_clear_pointer (&held[i], g_bytes_unref);
      dc_sha256_free (hashes[i]);
    }
  if (error != NULL)
    {
      g_mutex_lock (&st->lock);
      st->error = error;
      st->broken = TRUE;
      g_mutex_unlock (&st->lock);
      notify (st);
    }
  if (separate)
    g_free (wire);
  g_free (object);  /* NULL once kept as the result */
  stream_unref (st);
  return NULL;
}

/**
 * _dc_train_group_stream_early:
 * @rank: a reducer's rank in a roster of @n
 *
 * Whether that reducer may send its summed shard during its backward pass
 * (_dc_train_group_stream_start_early ()), so that its chunks may come
 * before its contributions to the others' shards: the tail layout's shards
 * final before the end (rank k and after, dc_train_shard_late_count ()).
 * A receiver's "known lost" for a contribution reads it
 * (_dc_train_group_summed_implies ()).
 */
gboolean
_dc_train_group_stream_early (const DcTrainShardLayout *layout,
                              guint                     n,
                              guint                     rank)
{
  guint k = dc_train_shard_late_count (layout, n);

  return k > 0 && rank >= k && rank < n;
}

/**
 * _dc_train_group_summed_implies:
 * @author: a roster rank
 *
 * Whether the summed shard of @author having come means that its
 * contribution to this device's shard came before it (it queued that
 * contribution first, on the same ordered channel): always, unless
 * @author's shard may stream during its backward pass and this device's
 * shard is final after it (a lower rank: its contribution leaves later).
 */
gboolean
_dc_train_group_summed_implies (DcTrainGroup *self,
                                guint         author)
{
  DcTrainShardLayout layout;

  _dc_train_group_layout (dc_train_session_get_model (self->session), &layout);
  return !(_dc_train_group_stream_early (&layout, self->roster->len, author)
           && self->rank < author);
}

/**
 * _dc_train_group_stream_start_early:
 * @own: this device's own contribution to its own shard, packed during the
 *   backward pass (its values final before the end)
 *
 * Starts this step's stream now, before this device's gradient is done,
 * where its shard allows it (_dc_train_group_stream_early ()) and a
 * receiver can tell its chunks from the contributions it still sends by
 * their size (the receiver keeps one object of each kind per sender in
 * progress: _dc_train_group_handle_chunk ()).
 */
void
_dc_train_group_stream_start_early (DcTrainGroup *self,
                                    GBytes       *own)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  DcTrainShardLayout layout;
  DcTrainStream *st;
  guint n = self->roster->len;

  if (own == NULL || self->state != STATE_COMPUTING)
    return;
  _dc_train_group_layout (model, &layout);
  if (!_dc_train_group_stream_early (&layout, n, self->rank)
      || (st = get_stream (self)) == NULL)
    return;
  for (guint r = 0; r < n; r++)
    if (r != self->rank
        && dc_train_shard_wire_size (DC_TRAIN_SHARD_CONTRIBUTION, st->wire, &layout, n, r)
           == st->total_s)
      return;
  _dc_train_group_stream_object (self, self->rank, own);
  _dc_train_group_stream_start (self);
}

/**
 * _dc_train_group_stream_start:
 *
 * Starts this step's stream, if the step streams: once this device sent
 * its own contributions (maybe_reduce (); its summed shard's chunks follow
 * them on every channel), or earlier (_dc_train_group_stream_start_early ()).
 *
 * Returns: %TRUE when the step's reduce is the stream's (started now or
 *   before); %FALSE when it sums whole (no stream, or a broken one, now
 *   dropped)
 */
gboolean
_dc_train_group_stream_start (DcTrainGroup *self)
{
  DcTrainStream *st = get_stream (self);
  GThread *thread;

  if (st == NULL)
    return FALSE;
  g_mutex_lock (&st->lock);
  if (st->broken)
    {
      g_mutex_unlock (&st->lock);
      self->stream_off_step = st->step;
      _dc_train_group_stream_drop (self);
      return FALSE;
    }
  if (st->started)
    {
      g_mutex_unlock (&st->lock);
      return TRUE;
    }
  st->started = TRUE;
  g_mutex_unlock (&st->lock);
  thread = g_thread_new ("dc-stream", stream_thread, stream_ref (st));
  g_thread_unref (thread);
  DC_TRAIN_GROUP_TRACE ("stream_start step=%" G_GUINT64_FORMAT, st->step);
  return TRUE;
}

/**
 * _dc_train_group_stream_drop:
 *
 * Drops the stream, if any (its step is taken again, the run ends, or it
 * broke): its thread stops at its next chunk, and what it made is never
 * sent.
 */
void
_dc_train_group_stream_drop (DcTrainGroup *self)
{
  DcTrainStream *st = g_steal_pointer (&self->stream);

  if (st == NULL)
    return;
  g_mutex_lock (&st->lock);
  st->cancelled = TRUE;
  g_cond_broadcast (&st->cond);
  g_mutex_unlock (&st->lock);
  stream_unref (st);
}

static void
send_to (DcTrainGroup *self,
         guint         i,
         GPtrArray    *frames)
{
  g_autoptr(GError) error = NULL;
  DcPeer *peer = _dc_train_group_find_peer (self, g_ptr_array_index (self->roster, i));

  if (peer != NULL
      && !_dc_train_group_send_frames (self, peer, DC_MESH_MSG_GRADIENTS, frames, &error))
    g_message ("cannot send the summed shard to %s: %s", dc_peer_get_name (peer),
               error->message);
}

/**
 * _dc_train_group_stream_release:
 * @i: a roster rank
 *
 * Queues to rank @i the summed-shard chunks held for it
 * (DC_TRAIN_GROUP_STREAM=hold): once this device's contribution to it is
 * queued (send_shard ()), or all its contributions (send_own_gradient ()).
 */
void
_dc_train_group_stream_release (DcTrainGroup *self,
                                guint         i)
{
  DcTrainStream *st = self->stream;
  GPtrArray *frames;

  if (st == NULL || i >= st->n || i >= self->roster->len)
    return;
  while ((frames = g_queue_pop_head (&st->held[i])) != NULL)
    {
      send_to (self, i, frames);
      g_ptr_array_unref (frames);
    }
}

/* Back on the main thread: queues the chunks made to every roster device,
 * and once the last is made keeps the summed shard as the whole reduce's
 * completion does (reduced_cb ()). */
static gboolean
stream_note_cb (gpointer user_data)
{
  StreamNote *note = user_data;
  DcTrainGroup *self = note->self;
  DcTrainStream *st = note->st;
  GQueue ready = G_QUEUE_INIT;
  gboolean finished, broken;
  StreamOut *out;

  if (self->stream != st || self->state == STATE_DONE || self->session == NULL)
    return G_SOURCE_REMOVE;
  g_mutex_lock (&st->lock);
  while ((out = g_queue_pop_head (&st->out)) != NULL)
    g_queue_push_tail (&ready, out);
  finished = st->finished;
  broken = st->broken;
  g_mutex_unlock (&st->lock);
  while ((out = g_queue_pop_head (&ready)) != NULL)
    {
      for (guint i = 0; i < st->n && i < self->roster->len; i++)
        {
          if (i == st->rank)
            continue;
          /* Held until this device's contribution to that peer is queued,
           * so that it does not wait behind this shard on the channel. */
          if (stream_mode () == MODE_HOLD && !self->own_sent && !self->own_shard_sent[i])
            {
              g_queue_push_tail (&st->held[i], g_ptr_array_ref (out->frames));
              continue;
            }
          _dc_train_group_stream_release (self, i);
          send_to (self, i, out->frames);
        }
      if (!self->own_reduced)
        st->early++;
      if (st->sent++ == 0)
        DC_TRAIN_GROUP_TRACE ("stream_first_sent step=%" G_GUINT64_FORMAT, st->step);
      stream_out_free (out);
    }
  if (broken && !finished)
    {
      /* The whole reduce takes over (maybe_reduce ()). */
      if (st->error != NULL)
        g_message ("the streamed sum of step %" G_GUINT64_FORMAT " stopped: %s: summed again "
                   "whole", st->step, st->error->message);
      self->stream_off_step = st->step;
      _dc_train_group_stream_drop (self);
      self->own_reduced = FALSE;
      _dc_train_group_advance (self);
      return G_SOURCE_REMOVE;
    }
  if (finished && st->result != NULL)
    {
      Gradient *own = g_new0 (Gradient, 1);

      own->rank = st->rank;
      own->loss = st->result_loss;
      own->object = g_steal_pointer (&st->result);
      g_hash_table_replace (self->gradients,
                            _dc_train_group_gradient_key (st->step, st->digest,
                                                          _dc_train_group_own_id (self)),
                            own);
      if (!self->own_reduced)
        {
          self->own_reduced = TRUE;
          self->t_reduce_began = g_get_monotonic_time ();
          DC_TRAIN_GROUP_TRACE ("reduce_begin step=%" G_GUINT64_FORMAT, st->step);
        }
      self->t_reduced = g_get_monotonic_time ();
      self->t_stream_chunks = st->sent;
      self->t_stream_early = st->early;
      self->t_stream_pieces = st->n_pieces;
      DC_TRAIN_GROUP_TRACE ("reduced_sent step=%" G_GUINT64_FORMAT " chunks=%u early=%u pieces=%u",
                            st->step, st->sent, st->early, st->n_pieces);
      _dc_train_group_advance (self);
    }
  return G_SOURCE_REMOVE;
}
