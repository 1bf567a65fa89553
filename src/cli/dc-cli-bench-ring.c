/* dc-cli-bench-ring.c: `daisychain-cli bench ring`, the inference ring's
 * prefill and decode tokens per second with 1, 2 and 3 stages on loopback,
 * as a ratio to one device (docs/BENCHMARKS.md).
 *
 * The model defaults to bench decode's SmolLM-135M-shaped random one. This
 * process serves it as a local Hub (a libsoup server on loopback, the file
 * mapped, byte ranges applied by the server), runs a signaling service and
 * the stages as `join --serve-layers` child processes (each with its own
 * cache), and is itself the head. Each device offers memory for its even
 * share of the layers, so that the plan uses exactly the stages asked.
 * One stage is the head alone: the same session and part code without a hop.
 *
 * --netns (root, iproute2's ip and tc): every stage runs in a network
 * namespace of its own, 198.18.0.(k + 1) on a veth to a bridge namespace,
 * and this process (the head, the Hub and the signaling service) reaches
 * the bridge through a veth of its own, 198.18.0.1; every device's egress
 * is shaped to 1 Gbit/s with 1 ms of delay by netem, or, where the kernel
 * has no sch_netem, to 1 Gbit/s by tbf with the 1 ms held by the delay hub
 * in place of the bridge (dc-cli-netns.c; the output's `shaping` says
 * which, as bench group's does).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"
/* sched_setaffinity, CPU_SET */
#define _GNU_SOURCE

#include "config.h"

#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "dc-cli.h"
#include "dc-cli-netns.h"
#include "dc-cli-python.h"
#include "dc-cli-resources.h"
#include "dc-context.h"
#include "dc-json-bounds.h"
#include "dc-regular-file.h"
#include "engine/dc-gemm-backend.h"
#include "engine/dc-parallel.h"
#include "infer/dc-infer-ring.h"
#include "infer/dc-model-repo.h"
#include "mesh/dc-room.h"
#include "model/dc-hf-model.h"

/* The repo id the local Hub serves the model folder as. */
#define BENCH_REPO "bench/model"
/* Longer than the 32-token limit, so a ring pipelines its prefill. */
#define BENCH_PROMPT_TEXT "In the beginning the devices were alone, each with its own small " \
  "memory and its own slow clock, and nobody could hold the whole of a large model at once. " \
  "Then they joined hands in a ring."
/* Generous for loading a 135M model's share over loopback on a busy machine. */
#define BENCH_STEP_TIMEOUT_S 600
/* --netns: the head's address, and the stages' are 198.18.0.(k + 1)
 * (198.18.0.0/15 is set aside for benchmarks, RFC 2544). */
#define NETNS_HEAD_ADDRESS "198.18.0.1"

typedef struct
{
  gboolean   on;
  DcCliNetns shaped;   /* the namespaces, links and switch (dc-cli-netns.c) */
} Netns;

static char *
netns_stage (Netns *netns,
             guint  k)
{
  return g_strdup_printf ("%s-s%u", netns->shaped.prefix, k);
}

/* The switch's namespace, the head's veth into it (this namespace,
 * NETNS_HEAD_ADDRESS) and one namespace per stage, N_STAGES - 1 of them,
 * joined by a bridge or the delay hub. */
static gboolean
netns_create (Netns   *netns,
              guint    n_stages,
              GError **error)
{
  g_autofree char *prefix = g_strdup_printf ("dcbr%d", (int) getpid ());
  g_autofree char *head = g_strdup_printf ("%sh", prefix);

  if (!dc_cli_netns_begin (&netns->shaped, "bench ring", prefix, error)
      || !dc_cli_netns_add (&netns->shaped, NULL, head, NETNS_HEAD_ADDRESS, error))
    return FALSE;
  for (guint k = 1; k < n_stages; k++)
    {
      g_autofree char *name = g_strdup_printf ("s%u", k);
      g_autofree char *address = g_strdup_printf ("198.18.0.%u", k + 1);

      if (!dc_cli_netns_add (&netns->shaped, name, NULL, address, error))
        return FALSE;
    }
  return dc_cli_netns_connect (&netns->shaped, error);
}

typedef struct
{
  GMainContext *context;
  GMainLoop    *loop;
  GThread      *thread;
  SoupServer   *server;
  GMappedFile  *weights;
  char         *dir;
  char         *url;
} Hub;

static void
hub_handler (SoupServer        *server,
             SoupServerMessage *msg,
             const char        *path,
             GHashTable        *query,
             gpointer           user_data)
{
  Hub *hub = user_data;
  const char *prefix = "/" BENCH_REPO "/resolve/main/";
  const char *file;
  g_autofree char *full = NULL;
  g_autofree char *contents = NULL;
  gsize len;

  if (!g_str_has_prefix (path, prefix) || strchr (path + strlen (prefix), '/') != NULL
      || path[strlen (prefix)] == '.' || path[strlen (prefix)] == '\0')
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  file = path + strlen (prefix);
  soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                "Accept-Ranges", "bytes");
  if (g_str_equal (file, "model.safetensors"))
    {
      SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
      const char *data = g_mapped_file_get_contents (hub->weights);
      goffset total = (goffset) g_mapped_file_get_length (hub->weights);
      SoupRange *ranges = NULL;
      int n_ranges = 0;

      /* One range (all the client asks): answered here, a slice of the
       * mapped file. Given the whole file, SoupServer cuts the range out of
       * a flattened copy, 270 MB copied for every request: that, not the
       * loopback, made the head's download take minutes. */
      if (soup_message_headers_get_ranges (request, total, &ranges, &n_ranges))
        {
          if (n_ranges == 1)
            {
              goffset start = ranges[0].start, end = ranges[0].end;

              soup_message_headers_set_content_range (
                soup_server_message_get_response_headers (msg), start, end, total);
              soup_message_body_append (soup_server_message_get_response_body (msg),
                                        SOUP_MEMORY_STATIC, data + start,
                                        (gsize) (end - start + 1));
              soup_server_message_set_status (msg, 206, NULL);
              soup_message_headers_free_ranges (request, ranges);
              return;
            }
          soup_message_headers_free_ranges (request, ranges);
        }
      /* No range, several or none satisfiable: SoupServer answers. */
      soup_message_body_append (soup_server_message_get_response_body (msg), SOUP_MEMORY_STATIC,
                                data, (gsize) total);
      soup_server_message_set_status (msg, 200, NULL);
      return;
    }
  full = g_build_filename (hub->dir, file, NULL);
  if (!g_file_get_contents (full, &contents, &len, NULL))
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  soup_message_body_append (soup_server_message_get_response_body (msg), SOUP_MEMORY_TAKE,
                            g_steal_pointer (&contents), len);
  soup_server_message_set_status (msg, 200, NULL);
}

static gpointer
hub_thread (gpointer data)
{
  Hub *hub = data;

  g_main_context_push_thread_default (hub->context);
  g_main_loop_run (hub->loop);
  g_main_context_pop_thread_default (hub->context);
  return NULL;
}

static gboolean
hub_quit_cb (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static void
hub_stop (Hub *hub)
{
  if (hub->thread != NULL)
    {
      GSource *source = g_idle_source_new ();

      g_source_set_callback (source, hub_quit_cb, hub->loop, NULL);
      g_source_attach (source, hub->context);
      g_source_unref (source);
      g_thread_join (hub->thread);
    }
  if (hub->server != NULL)
    {
      g_main_context_push_thread_default (hub->context);
      soup_server_disconnect (hub->server);
      g_clear_object (&hub->server);
      g_main_context_pop_thread_default (hub->context);
    }
  g_clear_pointer (&hub->loop, g_main_loop_unref);
  g_clear_pointer (&hub->context, g_main_context_unref);
  g_clear_pointer (&hub->weights, g_mapped_file_unref);
  g_clear_pointer (&hub->dir, g_free);
  g_clear_pointer (&hub->url, g_free);
}

/* Binds on this thread (so the URL is known before any other thread
 * starts), then serves on a thread of its own. */
static gboolean
hub_start (Hub         *hub,
           const char  *dir,
           const char  *bind,
           GError     **error)
{
  g_autofree char *weights = g_build_filename (dir, "model.safetensors", NULL);
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string (bind);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (inet, 0);
  GSList *uris;
  gboolean ok;

  hub->dir = g_strdup (dir);
  hub->weights = g_mapped_file_new (weights, FALSE, error);
  if (hub->weights == NULL)
    return FALSE;
  hub->context = g_main_context_new ();
  hub->loop = g_main_loop_new (hub->context, FALSE);
  g_main_context_push_thread_default (hub->context);
  hub->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (hub->server, "/", hub_handler, hub, NULL);
  ok = soup_server_listen (hub->server, address, 0, error);
  g_main_context_pop_thread_default (hub->context);
  if (!ok)
    return FALSE;
  uris = soup_server_get_uris (hub->server);
  hub->url = g_uri_to_string (uris->data);
  if (g_str_has_suffix (hub->url, "/"))
    hub->url[strlen (hub->url) - 1] = '\0';
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  return TRUE;
}

/* ---- one measurement ----------------------------------------------------- */

typedef struct
{
  GMainLoop *loop;
  gboolean   ok;
  GError    *error;
  gint64     t_submit, t_first, t_last;
  guint      n_prompt, n_tokens;
  gboolean   done;
  gboolean   waiting_offers;
  guint      need_offers;
  char      *failure;
  gboolean   timed_out;   /* the step's timeout fired (and removed itself) */
  guint64    ids_hash;    /* FNV-1a of the generated ids, in order */
  /* The head's pool at the first and the latest token: its decoded laps'
   * job and warm wake-ups. */
  DcParallelStats first_stats, last_stats;
  /* DC_RING_SCHED=1: every thread of the head and the stages at the first
   * token and at the end (sched_snapshot ()). */
  GArray     *sched_pids;   /* of gint; NULL when off */
  GHashTable *sched_first, *sched_last;
} Measure;

/* ---- DC_RING_SCHED: where the decode's threads ran ------------------------ */

/* One thread as the kernel reports it (/proc/PID/task/TID). */
typedef struct
{
  gint    pid, tid;
  char    comm[32];
  gint    cpu;            /* the processor it last ran on */
  gint64  run_ns, wait_ns, slices, migrations;
} TaskStat;

static gboolean
read_task (gint      pid,
           gint      tid,
           TaskStat *out)
{
  g_autofree char *dir = g_strdup_printf ("/proc/%d/task/%d", pid, tid);
  g_autofree char *path = g_build_filename (dir, "stat", NULL);
  g_autofree char *text = NULL;
  g_auto(GStrv) fields = NULL;
  const char *open_paren, *close_paren;

  memset (out, 0, sizeof *out);
  out->pid = pid;
  out->tid = tid;
  out->migrations = -1;
  if (!g_file_get_contents (path, &text, NULL, NULL) ||
      (open_paren = strchr (text, '(')) == NULL || (close_paren = strrchr (text, ')')) == NULL
      || close_paren < open_paren || close_paren[1] == '\0')
    return FALSE;
  g_strlcpy (out->comm, open_paren + 1,
             MIN (sizeof out->comm, (gsize) (close_paren - open_paren)));
  /* After the name: field 3 (the state) is index 0, field 39 (processor) index 36. */
  fields = g_strsplit (close_paren + 2, " ", -1);
  if (g_strv_length (fields) > 36)
    out->cpu = (gint) g_ascii_strtoll (fields[36], NULL, 10);
  g_clear_pointer (&text, g_free);
  g_free (path);
  path = g_build_filename (dir, "schedstat", NULL);
  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      char *end = text;

      out->run_ns = g_ascii_strtoll (end, &end, 10);
      out->wait_ns = g_ascii_strtoll (end, &end, 10);
      out->slices = g_ascii_strtoll (end, &end, 10);
    }
  g_clear_pointer (&text, g_free);
  g_free (path);
  /* Only with CONFIG_SCHED_DEBUG. */
  path = g_build_filename (dir, "sched", NULL);
  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      const char *at = strstr (text, "se.nr_migrations");

      if (at != NULL && (at = strchr (at, ':')) != NULL)
        out->migrations = g_ascii_strtoll (at + 1, NULL, 10);
    }
  return TRUE;
}

/* Every thread of PIDS, keyed by "pid/tid". */
static GHashTable *
sched_snapshot (GArray *pids)
{
  GHashTable *table = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  for (guint i = 0; i < pids->len; i++)
    {
      gint pid = g_array_index (pids, gint, i);
      g_autofree char *dir = g_strdup_printf ("/proc/%d/task", pid);
      g_autoptr(GDir) tasks = g_dir_open (dir, 0, NULL);
      const char *name;

      while (tasks != NULL && (name = g_dir_read_name (tasks)) != NULL)
        {
          TaskStat *t = g_new (TaskStat, 1);

          if (!read_task (pid, (gint) g_ascii_strtoll (name, NULL, 10), t))
            {
              g_free (t);
              continue;
            }
          g_hash_table_insert (table, g_strdup_printf ("%d/%d", t->pid, t->tid), t);
        }
    }
  return table;
}

/* One JSON line: per thread that ran between the two snapshots (was
 * switched in or accumulated run time), its run
 * time, its time runnable but waiting for a processor, its slices (times
 * it was switched in), its migrations (-1 when the kernel does not say)
 * and the processors it was on at the first token and at the end. */
static void
print_sched (Measure *m,
             guint    stages,
             guint    round)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  GHashTableIter iter;
  gpointer key, value;
  guint laps = m->n_tokens > 1 ? m->n_tokens - 1 : 1;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "sched");
  json_builder_add_boolean_value (builder, TRUE);
  json_builder_set_member_name (builder, "stages");
  json_builder_add_int_value (builder, stages);
  json_builder_set_member_name (builder, "round");
  json_builder_add_int_value (builder, round);
  json_builder_set_member_name (builder, "laps");
  json_builder_add_int_value (builder, laps);
  json_builder_set_member_name (builder, "pids");
  json_builder_begin_array (builder);
  for (guint i = 0; i < m->sched_pids->len; i++)
    json_builder_add_int_value (builder, g_array_index (m->sched_pids, gint, i));
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "threads");
  json_builder_begin_array (builder);
  g_hash_table_iter_init (&iter, m->sched_last);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const TaskStat *b = value;
      const TaskStat *a = g_hash_table_lookup (m->sched_first, key);
      TaskStat zero = { 0 };

      if (a == NULL)
        a = &zero;
      if (b->slices == a->slices && b->run_ns == a->run_ns)
        continue;
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "pid");
      json_builder_add_int_value (builder, b->pid);
      json_builder_set_member_name (builder, "tid");
      json_builder_add_int_value (builder, b->tid);
      json_builder_set_member_name (builder, "comm");
      json_builder_add_string_value (builder, b->comm);
      json_builder_set_member_name (builder, "run_ms");
      json_builder_add_double_value (builder, (b->run_ns - a->run_ns) / 1e6);
      json_builder_set_member_name (builder, "wait_ms");
      json_builder_add_double_value (builder, (b->wait_ns - a->wait_ns) / 1e6);
      json_builder_set_member_name (builder, "slices");
      json_builder_add_int_value (builder, b->slices - a->slices);
      json_builder_set_member_name (builder, "migrations");
      json_builder_add_int_value (builder, b->migrations >= 0 && a->migrations >= 0
                                           ? b->migrations - a->migrations : -1);
      json_builder_set_member_name (builder, "cpu_first");
      json_builder_add_int_value (builder, a == &zero ? -1 : a->cpu);
      json_builder_set_member_name (builder, "cpu_last");
      json_builder_add_int_value (builder, b->cpu);
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  dc_cli_print_json (builder);
  fflush (stdout);
}

static void
measure_event_cb (DcInferRing *ring,
                  const char  *kind,
                  const char  *detail,
                  guint64      value,
                  Measure     *m)
{
  if (m->waiting_offers && dc_infer_ring_get_n_offers (ring) >= m->need_offers &&
      dc_infer_ring_get_n_measured (ring) >= m->need_offers)
    g_main_loop_quit (m->loop);
}

static void
measure_prepared_cb (GObject      *source,
                     GAsyncResult *result,
                     gpointer      user_data)
{
  Measure *m = user_data;

  m->ok = dc_infer_ring_prepare_finish (DC_INFER_RING (source), result, &m->error);
  g_main_loop_quit (m->loop);
}

static void
measure_started_cb (DcInferSession *session,
                    guint           id,
                    guint           n_prompt,
                    Measure        *m)
{
  m->n_prompt = n_prompt;
}

static void
measure_token_cb (DcInferSession *session,
                  guint           id,
                  guint           token,
                  const char     *text,
                  double          rate,
                  Measure        *m)
{
  gint64 now = g_get_monotonic_time ();

  if (m->n_tokens++ == 0)
    {
      m->t_first = now;
      dc_parallel_get_stats (&m->first_stats);
      if (m->sched_pids != NULL)
        m->sched_first = sched_snapshot (m->sched_pids);
    }
  m->t_last = now;
  dc_parallel_get_stats (&m->last_stats);
  /* Every size must make one device's ids (same_ids): a 64-bit FNV-1a of
   * them, in order, is enough to compare. */
  for (guint b = 0; b < 4; b++)
    m->ids_hash = (m->ids_hash ^ ((token >> (8 * b)) & 0xff)) * G_GUINT64_CONSTANT (0x100000001b3);
}

static void
measure_finished_cb (DcInferSession *session,
                     guint           id,
                     gboolean        stopped,
                     const char     *error_message,
                     double          rate,
                     Measure        *m)
{
  m->failure = g_strdup (error_message);
  m->done = TRUE;
  if (m->sched_pids != NULL && m->sched_first != NULL)
    m->sched_last = sched_snapshot (m->sched_pids);
  g_main_loop_quit (m->loop);
}

static gboolean
measure_timeout_cb (gpointer data)
{
  Measure *m = data;

  if (m->error == NULL && m->failure == NULL)
    m->failure = g_strdup_printf ("no result within %u s", BENCH_STEP_TIMEOUT_S);
  m->done = TRUE;
  m->timed_out = TRUE;
  g_main_loop_quit (m->loop);
  return G_SOURCE_REMOVE;
}

/* Copies the files under SRC into DST (a folder that exists), folders
 * included; what cannot be copied is left out (the stage fetches it). */
static void
copy_tree (const char *src,
           const char *dst)
{
  g_autoptr(GDir) dir = g_dir_open (src, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *from = g_build_filename (src, name, NULL);
      g_autofree char *to = g_build_filename (dst, name, NULL);

      if (g_file_test (from, G_FILE_TEST_IS_SYMLINK))
        continue;
      if (g_file_test (from, G_FILE_TEST_IS_DIR))
        {
          if (g_mkdir (to, 0700) == 0)
            copy_tree (from, to);
        }
      else if (g_file_test (from, G_FILE_TEST_IS_REGULAR))
        {
          g_autoptr(GFile) a = g_file_new_for_path (from);
          g_autoptr(GFile) b = g_file_new_for_path (to);

          g_file_copy (a, b, G_FILE_COPY_NONE, NULL, NULL, NULL, NULL);
        }
    }
}

/* A stage's cache folder, made here for one measurement. */
static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);

      if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
        remove_tree (child);
      else
        g_remove (child);
    }
  g_rmdir (path);
}

/* A stage's decoded hops, as its process wrote them (DC_RING_STAGE_TIMINGS). */
typedef struct
{
  gboolean known;
  gint64   hops, inline_hops, first_layer, last_layer, helper_wakes, job_wakes;
  double   queue_ms, compute_ms, send_ms, receive_ms, helper_wake_ms;
} StageTimes;

typedef struct
{
  guint  stages, threads, head_threads, round, head_layers;
  double prefill_tok_s, decode_tok_s, lap_ms, hop_ms, head_compute_ms, ring_wait_ms;
  double head_send_ms, head_wake_ms, head_receive_ms;
  double head_layers_ms, head_lm_ms, head_between_ms, head_helper_wake_ms;
  guint64 ids_hash, head_helper_wakes;
  double head_lap_job_wakes, head_lap_warm_wakes;   /* per decoded token */
  gint   pinned;                                     /* --pin-cores: the head's cores, else 0 */
  StageTimes stage_times[8];   /* of stages 1 … stages - 1 (--stages: at most 8) */
  guint  prompt_tokens, tokens;
} Result;

/* Reads what a stage's process wrote at the turn's end; FALSE when it
 * wrote nothing readable. */
static gboolean
read_stage_times (const char *path,
                  StageTimes *out)
{
  g_autofree char *text = NULL;
  g_autoptr(JsonNode) root = NULL;
  JsonObject *object;

  /* A few hundred bytes: anything larger is not a stage's. */
  if (!dc_regular_file_get_contents (path, 4096, &text, NULL, NULL) ||
      (root = dc_json_parse_bounded (text, -1, 4096, 8, NULL)) == NULL ||
      !JSON_NODE_HOLDS_OBJECT (root))
    return FALSE;
  object = json_node_get_object (root);
  out->hops = json_object_get_int_member_with_default (object, "hops", 0);
  out->inline_hops = json_object_get_int_member_with_default (object, "inline_hops", 0);
  out->queue_ms = json_object_get_double_member_with_default (object, "queue_ms", 0.0);
  out->compute_ms = json_object_get_double_member_with_default (object, "compute_ms", 0.0);
  out->send_ms = json_object_get_double_member_with_default (object, "send_ms", 0.0);
  out->receive_ms = json_object_get_double_member_with_default (object, "receive_ms", 0.0);
  out->helper_wakes = json_object_get_int_member_with_default (object, "helper_wakes", 0);
  out->job_wakes = json_object_get_int_member_with_default (object, "job_wakes", -1);
  out->helper_wake_ms = json_object_get_double_member_with_default (object, "helper_wake_ms",
                                                                    0.0);
  out->first_layer = 0;
  out->last_layer = -1;
  if (json_object_has_member (object, "layers") &&
      JSON_NODE_HOLDS_ARRAY (json_object_get_member (object, "layers")))
    {
      JsonArray *layers = json_object_get_array_member (object, "layers");

      if (json_array_get_length (layers) == 2)
        {
          out->first_layer = json_array_get_int_element (layers, 0);
          out->last_layer = json_array_get_int_element (layers, 1);
        }
    }
  out->known = TRUE;
  return TRUE;
}

/* In the child, before exec (--pin-cores): only a system call. */
static void
pin_child_setup (gpointer data)
{
  (void) sched_setaffinity (0, sizeof (cpu_set_t), data);
}

/* --pin-cores: every thread of this process (the head: its generation
 * thread, product helpers, GStreamer's threads) on CPUS; threads started
 * later inherit it from the thread that starts them. */
static void
pin_self (const cpu_set_t *cpus)
{
  g_autoptr(GDir) tasks = g_dir_open ("/proc/self/task", 0, NULL);
  const char *name;

  while (tasks != NULL && (name = g_dir_read_name (tasks)) != NULL)
    (void) sched_setaffinity ((pid_t) g_ascii_strtoll (name, NULL, 10), sizeof (cpu_set_t), cpus);
}

/* The threads of each device of a ring of @stages on this host (no
 * --threads): dc_infer_ring_shared_host_threads (), half the processors
 * for a ring (until s23 processors / stages, 5 of 16 at three stages: the
 * 3-stage ring ran at 0.70–0.73 of one device on the H200 host against
 * 0.83–0.86 with 8, BENCHMARKS.md). Pinned (--pin-cores), a device has
 * only its own share of the cores. */
static guint
bench_threads (guint    stages,
               gboolean pinned)
{
  guint processors = MAX (1, g_get_num_processors ());

  return pinned ? MAX (1, processors / stages)
                : dc_infer_ring_shared_host_threads (processors, stages);
}

/* --pin-cores: device K of a ring of N on this machine's cores: the head
 * (K = 0) the first ⌈cores / N⌉, each stage the next ⌊…⌋ or ⌈…⌉, so that
 * all of them are used (16 cores, 3 devices: 0–5, 6–10, 11–15). One
 * device alone (N = 1) is the whole machine. */
static void
device_cores (guint      k,
              guint      n,
              cpu_set_t *out)
{
  guint cores = MIN ((guint) MAX (1, g_get_num_processors ()), CPU_SETSIZE);
  guint first = (guint) (((guint64) k * cores + n - 1) / n);
  guint last = (guint) (((guint64) (k + 1) * cores + n - 1) / n);

  CPU_ZERO (out);
  /* More devices than cores: one core each, shared round the ring. */
  if (n >= cores)
    {
      CPU_SET (k % cores, out);
      return;
    }
  for (guint c = first; c < last; c++)
    CPU_SET (c, out);
}

static GSubprocess *
spawn_cli (const char       *netns,
           const char       *hub_url,
           const char       *cache,
           const cpu_set_t  *cpus,
           GError          **error,
           ...)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  const char *arg;
  va_list args;

  g_autofree char *self_exe = g_file_read_link ("/proc/self/exe", error);

  if (self_exe == NULL)
    return NULL;
  if (netns != NULL)
    {
      g_ptr_array_add (argv, (gpointer) "ip");
      g_ptr_array_add (argv, (gpointer) "netns");
      g_ptr_array_add (argv, (gpointer) "exec");
      g_ptr_array_add (argv, (gpointer) netns);
    }
  g_ptr_array_add (argv, self_exe);
  va_start (args, error);
  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);
  if (hub_url != NULL)
    g_subprocess_launcher_setenv (launcher, "HF_ENDPOINT", hub_url, TRUE);
  if (cpus != NULL)
    g_subprocess_launcher_set_child_setup (launcher, pin_child_setup,
                                           g_memdup2 (cpus, sizeof *cpus), g_free);
  if (cache != NULL)
    {
      g_autofree char *times = g_build_filename (cache, "hop-times.json", NULL);

      g_subprocess_launcher_setenv (launcher, "DC_MODEL_CACHE_DIR", cache, TRUE);
      g_subprocess_launcher_setenv (launcher, "DC_RING_STAGE_TIMINGS", times, TRUE);
    }
  return g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata, error);
}

static gboolean
measure (DcContext   *context,
         DcModelRepo *repo,
         Netns       *netns,
         const char  *signal_url,
         const char  *hub_url,
         guint        stages,
         guint        tokens,
         guint        threads,
         guint        head_threads,
         gboolean     pin,
         guint        round,
         Result      *result,
         GError     **error)
{
  const DcHfConfig *c = dc_model_repo_get_config (repo);
  const guint share = (c->n_layers + stages - 1) / stages;
  const guint context_len = 256;
  g_autoptr(GPtrArray) children = g_ptr_array_new_with_free_func (g_object_unref);
  g_autoptr(GPtrArray) caches = g_ptr_array_new_with_free_func (g_free);
  const char *head_cache = g_getenv ("DC_MODEL_CACHE_DIR");
  g_autofree char *room = dc_room_generate_code ();
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcInferRing) ring = NULL;
  guint64 layer = dc_hf_model_part_memory_bytes (c, 0, 1, FALSE, context_len);
  guint64 ends = dc_hf_model_part_memory_bytes (c, 0, 0, TRUE, context_len);
  /* Half a layer of slack: the plan then has no room for one more. */
  guint64 stage_memory = layer * share + layer / 2;
  Measure m = { 0 };
  DcParallelStats before, after;
  cpu_set_t all_cpus, head_cpus;
  gboolean pinned = FALSE;
  DcInferSettings settings;
  DcInferSession *session;
  guint timeout;
  gboolean ok = FALSE;

  m.loop = loop;
  /* --pin-cores: a ring's devices each on cores of their own (the head,
   * this process, for this size only); one device keeps the machine. */
  if (pin && stages > 1 && sched_getaffinity (0, sizeof all_cpus, &all_cpus) == 0)
    {
      device_cores (0, stages, &head_cpus);
      pin_self (&head_cpus);
      pinned = TRUE;
      result->pinned = CPU_COUNT (&head_cpus);
    }
  if (g_strcmp0 (g_getenv ("DC_RING_SCHED"), "1") == 0)
    {
      gint self = (gint) getpid ();

      m.sched_pids = g_array_new (FALSE, FALSE, sizeof (gint));
      g_array_append_val (m.sched_pids, self);
    }
  /* Every process of this size (the head here, the stages below) computes
   * with THREADS: stages sharing one host split its cores instead of each
   * running as many threads as there are cores. */
  dc_gemm_backend_set_n_threads (dc_context_get_backend (context), threads);
  result->threads = threads;
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ALL;
  config.hello = dc_context_new_hello (context, "head");
  config.peer.ice_addresses = g_new0 (char *, 2);
  config.peer.ice_addresses[0] = g_strdup (netns->on ? NETNS_HEAD_ADDRESS : "127.0.0.1");
  group = dc_group_new (&config);
  ring = dc_infer_ring_new (context, group, repo, config.hello->probe_hash,
                            stages == 1 ? 0 : ends + stage_memory);
  g_signal_connect (ring, "event", G_CALLBACK (measure_event_cb), &m);
  dc_infer_ring_set_head_threads (ring, head_threads);
  result->head_threads = stages > 1 && head_threads > 0 ? head_threads : threads;
  /* What the head has cached (all of it after a one-device size): each
   * stage reads its layers from disk, checked against the journal's
   * hashes, instead of fetching them over loopback, which took most of a
   * size's minute on the H200 host. Loading is not measured. Copied before
   * the head joins the room: copying blocks this thread (seconds on a busy
   * disk), and a join left unanswered that long is closed by the signaling
   * service, which left the stages waiting for a head that was gone. */
  for (guint i = 1; i < stages; i++)
    {
      char *cache = g_dir_make_tmp ("dc-bench-ring-XXXXXX", error);

      if (cache == NULL)
        goto out;
      g_ptr_array_add (caches, cache);
      if (head_cache != NULL)
        copy_tree (head_cache, cache);
    }
  if (!dc_group_join_room (group, signal_url, room, error))
    goto out;
  for (guint i = 1; i < stages; i++)
    {
      g_autofree char *name = g_strdup_printf ("stage%u", i);
      g_autofree char *memory = g_strdup_printf ("%.6f", stage_memory / 1e6);
      g_autofree char *n_threads = g_strdup_printf ("%u", threads);
      g_autofree char *ns = netns->on ? netns_stage (netns, i) : NULL;
      g_autofree char *address = netns->on ? g_strdup_printf ("198.18.0.%u", i + 1)
                                           : g_strdup ("127.0.0.1");
      const char *cache = g_ptr_array_index (caches, i - 1);
      GSubprocess *child;
      cpu_set_t cpus;

      device_cores (i, stages, &cpus);
      child = spawn_cli (ns, hub_url, cache, pinned ? &cpus : NULL, error, "join", "--serve-layers", "--signal",
                         signal_url, "--room", room, "--name", name, "--ice-address", address,
                         "--memory-mb", memory, "--threads", n_threads, NULL);
      if (child == NULL)
        goto out;
      g_ptr_array_add (children, child);
      if (m.sched_pids != NULL)
        {
          gint pid = (gint) g_ascii_strtoll (g_subprocess_get_identifier (child), NULL, 10);

          g_array_append_val (m.sched_pids, pid);
        }
    }
  timeout = g_timeout_add_seconds (BENCH_STEP_TIMEOUT_S, measure_timeout_cb, &m);
  m.need_offers = stages - 1;
  if (dc_infer_ring_get_n_offers (ring) < m.need_offers ||
      dc_infer_ring_get_n_measured (ring) < m.need_offers)
    {
      m.waiting_offers = TRUE;
      g_main_loop_run (loop);
      m.waiting_offers = FALSE;
    }
  if (m.failure == NULL)
    {
      dc_infer_ring_prepare_async (ring, context_len, NULL, measure_prepared_cb, &m);
      g_main_loop_run (loop);
    }
  if (!m.ok || m.failure != NULL)
    {
      if (!m.timed_out)
        g_source_remove (timeout);
      if (m.error != NULL)
        g_propagate_error (error, g_steal_pointer (&m.error));
      else
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s", m.failure);
      goto out;
    }
  session = dc_infer_ring_get_session (ring);
  g_signal_connect (session, "started", G_CALLBACK (measure_started_cb), &m);
  g_signal_connect (session, "token", G_CALLBACK (measure_token_cb), &m);
  g_signal_connect (session, "finished", G_CALLBACK (measure_finished_cb), &m);
  dc_infer_settings_init_default (&settings);
  settings.n_tokens = tokens;
  settings.context = context_len;
  dc_parallel_get_stats (&before);
  m.t_submit = g_get_monotonic_time ();
  dc_infer_session_submit (session, BENCH_PROMPT_TEXT, &settings);
  while (!m.done)
    g_main_loop_run (loop);
  if (!m.timed_out)
    g_source_remove (timeout);
  g_signal_handlers_disconnect_by_data (session, &m);
  if (m.failure != NULL || m.n_tokens < 2)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%u stages: %s", stages,
                   m.failure != NULL ? m.failure : "fewer than 2 tokens");
      goto out;
    }
  result->stages = dc_ring_plan_get_n_stages (dc_infer_ring_get_plan (ring));
  result->prompt_tokens = m.n_prompt;
  result->tokens = m.n_tokens;
  /* Prefill: the prompt and the first token; decode: the tokens after it. */
  result->prefill_tok_s = m.n_prompt / ((m.t_first - m.t_submit) / 1e6);
  result->decode_tok_s = (m.n_tokens - 1) / ((m.t_last - m.t_first) / 1e6);
  result->lap_ms = dc_infer_ring_get_plan (ring)->lap_ms;
  result->hop_ms = stages > 1 ? dc_infer_ring_get_hop_ms (ring) : 0.0;
  dc_infer_ring_get_lap_times (ring, &result->head_compute_ms, &result->ring_wait_ms);
  dc_infer_ring_get_lap_handoffs (ring, &result->head_send_ms, &result->head_wake_ms);
  result->head_receive_ms = dc_infer_ring_get_lap_receive_ms (ring);
  dc_infer_ring_get_lap_split (ring, &result->head_layers_ms, &result->head_lm_ms,
                               &result->head_between_ms);
  {
    const DcRingStage *head = dc_ring_plan_get_stage (dc_infer_ring_get_plan (ring), 0);

    result->head_layers = head->last - head->first;
  }
  result->ids_hash = m.ids_hash;
  /* The decoded laps' wake-ups of the head's helpers: by published jobs
   * (a sleeper signalled for each helper wanted beyond those spinning) and
   * by the answer's warm. */
  result->head_lap_job_wakes = m.n_tokens > 1
                               ? (double) (m.last_stats.job_wakes - m.first_stats.job_wakes)
                                 / (m.n_tokens - 1) : 0.0;
  result->head_lap_warm_wakes = m.n_tokens > 1
                                ? (double) (m.last_stats.warm_wakes - m.first_stats.warm_wakes)
                                  / (m.n_tokens - 1) : 0.0;
  if (m.sched_pids != NULL && m.sched_first != NULL && m.sched_last != NULL)
    print_sched (&m, stages, round);
  dc_parallel_get_stats (&after);
  result->head_helper_wakes = after.warm_wakes - before.warm_wakes;
  result->head_helper_wake_ms = result->head_helper_wakes > 0
                                ? (after.warm_wake_ns - before.warm_wake_ns)
                                  / (1e6 * result->head_helper_wakes)
                                : 0.0;
  ok = TRUE;

out:
  dc_infer_ring_close (ring);
  dc_group_leave (group);
  {
    gint64 until = g_get_monotonic_time () + DC_GROUP_LEAVE_GRACE_MS * 1000;

    while (g_get_monotonic_time () < until)
      if (!g_main_context_iteration (NULL, FALSE))
        g_usleep (5000);
  }
  for (guint i = 0; i < children->len; i++)
    {
      g_subprocess_send_signal (g_ptr_array_index (children, i), SIGTERM);
      g_subprocess_wait (g_ptr_array_index (children, i), NULL, NULL);
    }
  for (guint i = 0; i < caches->len; i++)
    {
      g_autofree char *times = g_build_filename (g_ptr_array_index (caches, i),
                                                 "hop-times.json", NULL);

      if (ok && i < G_N_ELEMENTS (result->stage_times))
        read_stage_times (times, &result->stage_times[i]);
      remove_tree (g_ptr_array_index (caches, i));
    }
  g_signal_handlers_disconnect_by_data (ring, &m);
  g_clear_error (&m.error);
  g_free (m.failure);
  g_clear_pointer (&m.sched_pids, g_array_unref);
  g_clear_pointer (&m.sched_first, g_hash_table_unref);
  g_clear_pointer (&m.sched_last, g_hash_table_unref);
  if (pinned)
    pin_self (&all_cpus);
  return ok;
}

/* One size's line; ONE is the first size measured (the ratios' base: one
 * device by default). */
static void
print_result (DcCliOptions *options,
              Netns        *netns,
              const Result *r,
              const Result *one)
{
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();
      g_autofree char *note = NULL;

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "stages");
      json_builder_add_int_value (builder, r->stages);
      json_builder_set_member_name (builder, "threads");
      json_builder_add_int_value (builder, r->threads);
      /* The head's final norm and head ran on these (--head-threads). */
      json_builder_set_member_name (builder, "head_threads");
      json_builder_add_int_value (builder, r->head_threads);
      json_builder_set_member_name (builder, "round");
      json_builder_add_int_value (builder, r->round);
      /* The same ids as the first size of the round (one device): the
       * ring's products are exact, so anything else is a bug. */
      json_builder_set_member_name (builder, "same_ids");
      json_builder_add_boolean_value (builder, r->ids_hash == one->ids_hash &&
                                               r->tokens == one->tokens);
      json_builder_set_member_name (builder, "prompt_tokens");
      json_builder_add_int_value (builder, r->prompt_tokens);
      json_builder_set_member_name (builder, "tokens");
      json_builder_add_int_value (builder, r->tokens);
      json_builder_set_member_name (builder, "prefill_tok_s");
      json_builder_add_double_value (builder, r->prefill_tok_s);
      json_builder_set_member_name (builder, "decode_tok_s");
      json_builder_add_double_value (builder, r->decode_tok_s);
      json_builder_set_member_name (builder, "prefill_ratio");
      json_builder_add_double_value (builder, r->prefill_tok_s / one->prefill_tok_s);
      json_builder_set_member_name (builder, "decode_ratio");
      json_builder_add_double_value (builder, r->decode_tok_s / one->decode_tok_s);
      json_builder_set_member_name (builder, "lap_estimate_ms");
      json_builder_add_double_value (builder, r->lap_ms);
      /* Measured: the lap a decoded token took, and one hop (half the
       * median ping round trip): what the hops cost beside compute. */
      json_builder_set_member_name (builder, "lap_ms");
      json_builder_add_double_value (builder, 1000.0 / r->decode_tok_s);
      json_builder_set_member_name (builder, "hop_ms");
      json_builder_add_double_value (builder, r->hop_ms);
      /* Of a decoded token's lap: the head's own compute (its layers,
       * the norm and head) and its wait for the ring (hops, the
       * stages' compute and the threads between). */
      json_builder_set_member_name (builder, "head_compute_ms");
      json_builder_add_double_value (builder, r->head_compute_ms);
      json_builder_set_member_name (builder, "ring_wait_ms");
      json_builder_add_double_value (builder, r->ring_wait_ms);
      /* Of head_compute_ms: the head's layers (the embedding, its layers
       * and, in a ring, the hop's encoding) and its final norm and head;
       * per layer, to hold against a stage's layer_ms and one device's;
       * and the session's own work between two tokens (sampling, …),
       * outside head_compute_ms and ring_wait_ms. */
      json_builder_set_member_name (builder, "head_layers_ms");
      json_builder_add_double_value (builder, r->head_layers_ms);
      json_builder_set_member_name (builder, "head_layer_ms");
      json_builder_add_double_value (builder, r->head_layers > 0
                                              ? r->head_layers_ms / r->head_layers : 0.0);
      json_builder_set_member_name (builder, "head_lm_ms");
      json_builder_add_double_value (builder, r->head_lm_ms);
      json_builder_set_member_name (builder, "head_between_ms");
      json_builder_add_double_value (builder, r->head_between_ms);
      /* Per decoded token: the head's sleeping helpers its products'
       * calls signalled, and those the answer's warm woke. */
      json_builder_set_member_name (builder, "head_job_wakes");
      json_builder_add_double_value (builder, r->head_lap_job_wakes);
      json_builder_set_member_name (builder, "head_warm_wakes");
      json_builder_add_double_value (builder, r->head_lap_warm_wakes);
      if (r->pinned > 0)
        {
          json_builder_set_member_name (builder, "pinned_cores");
          json_builder_add_int_value (builder, r->pinned);
        }
      if (r->stages > 1)
        {
          double rest = r->ring_wait_ms - r->head_send_ms - r->head_wake_ms;
          double receive = r->head_receive_ms;
          gboolean all = TRUE;

          /* Of the wait: on the head, the hop's way from the generation
           * thread to the send and the answer's from its arrival back to
           * the generation thread; on each stage, arrival → compute start
           * (queue), compute, compute end → sent; what is left is the
           * wires and the receiving threads (transport_ms). */
          json_builder_set_member_name (builder, "head_send_ms");
          json_builder_add_double_value (builder, r->head_send_ms);
          json_builder_set_member_name (builder, "head_wake_ms");
          json_builder_add_double_value (builder, r->head_wake_ms);
          json_builder_set_member_name (builder, "head_receive_ms");
          json_builder_add_double_value (builder, r->head_receive_ms);
          /* The head's helpers woken by an answer, and their wake's time. */
          json_builder_set_member_name (builder, "head_helper_wakes");
          json_builder_add_int_value (builder, (gint64) r->head_helper_wakes);
          json_builder_set_member_name (builder, "head_helper_wake_ms");
          json_builder_add_double_value (builder, r->head_helper_wake_ms);
          json_builder_set_member_name (builder, "stage_hops");
          json_builder_begin_array (builder);
          for (guint i = 0; i + 1 < r->stages && i < G_N_ELEMENTS (r->stage_times); i++)
            {
              const StageTimes *t = &r->stage_times[i];

              json_builder_begin_object (builder);
              json_builder_set_member_name (builder, "stage");
              json_builder_add_int_value (builder, i + 1);
              if (t->known)
                {
                  json_builder_set_member_name (builder, "hops");
                  json_builder_add_int_value (builder, t->hops);
                  json_builder_set_member_name (builder, "inline_hops");
                  json_builder_add_int_value (builder, t->inline_hops);
                  json_builder_set_member_name (builder, "queue_ms");
                  json_builder_add_double_value (builder, t->queue_ms);
                  json_builder_set_member_name (builder, "compute_ms");
                  json_builder_add_double_value (builder, t->compute_ms);
                  if (t->last_layer >= t->first_layer)
                    {
                      json_builder_set_member_name (builder, "layer_ms");
                      json_builder_add_double_value (builder, t->compute_ms /
                                                     (t->last_layer - t->first_layer + 1));
                    }
                  json_builder_set_member_name (builder, "send_ms");
                  json_builder_add_double_value (builder, t->send_ms);
                  json_builder_set_member_name (builder, "receive_ms");
                  json_builder_add_double_value (builder, t->receive_ms);
                  json_builder_set_member_name (builder, "helper_wakes");
                  json_builder_add_int_value (builder, t->helper_wakes);
                  json_builder_set_member_name (builder, "helper_wake_ms");
                  json_builder_add_double_value (builder, t->helper_wake_ms);
                  if (t->job_wakes >= 0)
                    {
                      json_builder_set_member_name (builder, "job_wakes");
                      json_builder_add_int_value (builder, t->job_wakes);
                    }
                  rest -= t->queue_ms + t->compute_ms + t->send_ms;
                  receive += t->receive_ms;
                }
              else
                all = FALSE;
              json_builder_end_object (builder);
            }
          json_builder_end_array (builder);
          if (all)
            {
              json_builder_set_member_name (builder, "transport_ms");
              json_builder_add_double_value (builder, rest);
              /* Of transport_ms: every hop's way from webrtcbin's
               * on-message-data signal to our handler (the head's
               * head_receive_ms and the stages' receive_ms); the rest is
               * the wires, SCTP/DTLS and webrtcbin's own threads. */
              json_builder_set_member_name (builder, "receive_handoff_ms");
              json_builder_add_double_value (builder, receive);
            }
        }
      json_builder_set_member_name (builder, "network");
      json_builder_add_string_value (builder, !netns->on ? "loopback"
                                     : dc_cli_netns_network (&netns->shaped));
      if (netns->on)
        dc_cli_netns_add_json (&netns->shaped, builder);
      if (netns->on && r->stages > 1)
        {
          /* The goal on the shaped network: a decoded token
           * within 2 ms of one device's plus a round trip per hop. */
          double goal = 1000.0 / one->decode_tok_s + r->stages * 2.0 * r->hop_ms + 2.0;

          json_builder_set_member_name (builder, "goal_ms");
          json_builder_add_double_value (builder, goal);
          json_builder_set_member_name (builder, "goal_met");
          json_builder_add_boolean_value (builder, 1000.0 / r->decode_tok_s <= goal);
        }
      if (netns->on && (note = dc_cli_netns_note (&netns->shaped)) != NULL)
        {
          json_builder_set_member_name (builder, "note");
          json_builder_add_string_value (builder, note);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    g_print (_("%u stages: prefill %.0f tokens/s (%.2f×), decode %.1f tokens/s (%.2f×)\n"),
             r->stages, r->prefill_tok_s, r->prefill_tok_s / one->prefill_tok_s,
             r->decode_tok_s, r->decode_tok_s / one->decode_tok_s);
  fflush (stdout);
}

/* The rounds' figure of size I (of N_SIZES, RESULTS round after round):
 * its decode median and range, and the ratio of its median to the first
 * size's median, which no single round's order shifts. */
static void
print_summary (DcCliOptions *options,
               GArray       *results,
               guint         n_sizes,
               guint         i)
{
  g_autoptr(GArray) decode = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) base = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) prefill = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) base_prefill = g_array_new (FALSE, FALSE, sizeof (double));
  const Result *first = &g_array_index (results, Result, i);
  double d_median, b_median, p_median, bp_median, lo, hi;
  gboolean same_ids = TRUE;

  for (guint k = i; k < results->len; k += n_sizes)
    {
      const Result *r = &g_array_index (results, Result, k);
      const Result *b = &g_array_index (results, Result, k - i);

      same_ids = same_ids && r->ids_hash == b->ids_hash && r->tokens == b->tokens;
      g_array_append_val (decode, r->decode_tok_s);
      g_array_append_val (prefill, r->prefill_tok_s);
      g_array_append_val (base, b->decode_tok_s);
      g_array_append_val (base_prefill, b->prefill_tok_s);
    }
  d_median = dc_cli_median (decode);
  lo = g_array_index (decode, double, 0);
  hi = g_array_index (decode, double, decode->len - 1);
  b_median = dc_cli_median (base);
  p_median = dc_cli_median (prefill);
  bp_median = dc_cli_median (base_prefill);
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "summary");
      json_builder_add_boolean_value (builder, TRUE);
      json_builder_set_member_name (builder, "stages");
      json_builder_add_int_value (builder, first->stages);
      json_builder_set_member_name (builder, "threads");
      json_builder_add_int_value (builder, first->threads);
      json_builder_set_member_name (builder, "head_threads");
      json_builder_add_int_value (builder, first->head_threads);
      json_builder_set_member_name (builder, "same_ids");
      json_builder_add_boolean_value (builder, same_ids);
      json_builder_set_member_name (builder, "rounds");
      json_builder_add_int_value (builder, decode->len);
      json_builder_set_member_name (builder, "decode_tok_s_median");
      json_builder_add_double_value (builder, d_median);
      json_builder_set_member_name (builder, "decode_tok_s_min");
      json_builder_add_double_value (builder, lo);
      json_builder_set_member_name (builder, "decode_tok_s_max");
      json_builder_add_double_value (builder, hi);
      json_builder_set_member_name (builder, "lap_ms_median");
      json_builder_add_double_value (builder, 1000.0 / d_median);
      json_builder_set_member_name (builder, "lap_ms_min");
      json_builder_add_double_value (builder, 1000.0 / hi);
      json_builder_set_member_name (builder, "lap_ms_max");
      json_builder_add_double_value (builder, 1000.0 / lo);
      json_builder_set_member_name (builder, "prefill_tok_s_median");
      json_builder_add_double_value (builder, p_median);
      json_builder_set_member_name (builder, "decode_ratio_of_medians");
      json_builder_add_double_value (builder, d_median / b_median);
      json_builder_set_member_name (builder, "prefill_ratio_of_medians");
      json_builder_add_double_value (builder, p_median / bp_median);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    g_print (_("%u stages over %u rounds: decode median %.1f tokens/s (%.1f–%.1f), "
               "%.2f× the first size's median\n"),
             first->stages, decode->len, d_median, lo, hi, d_median / b_median);
  fflush (stdout);
}

/* ---- the command --------------------------------------------------------- */

static char *
ensure_default_model (GError **error)
{
  g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "daisychain", "bench",
                                           "smollm-135m-random", NULL);
  g_autofree char *weights = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *out = NULL;
  const char *args[] = { dir, NULL };

  if (g_file_test (weights, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer (&dir);
  g_printerr (_("bench ring: writing the SmolLM-135M-shaped random model to %s (once)…\n"), dir);
  out = dc_cli_python_run (RESOURCE_BASE "/cli/make-bench-model.py", args, error);
  if (out == NULL)
    {
      g_prefix_error (error, _("cannot write the benchmark model: "));
      return NULL;
    }
  return g_steal_pointer (&dir);
}

/* Comma-separated numbers of [LO, HI], at most MOST of them, into OUT. */
static gboolean
parse_list (const char *text,
            guint       lo,
            guint       hi,
            guint       most,
            GArray     *out)
{
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);

  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 v;

      if (out->len >= most || !g_ascii_string_to_unsigned (parts[i], 10, lo, hi, &v, NULL))
        return FALSE;
      g_array_append_val (out, (guint) { (guint) v });
    }
  return out->len > 0;
}

/* What one line measures: a ring size, and for rings of two or more the
 * head's threads for its final norm and head (0: as its layers). */
typedef struct
{
  guint stages;
  guint head_threads;
} Run;

int
dc_cli_bench_ring_run (const DcCliCommand  *command,
                       DcCliOptions        *options,
                       int                  argc,
                       char               **argv)
{
  g_autofree char *model_arg = NULL, *stages_arg = NULL, *model_dir = NULL;
  g_autofree char *head_threads_arg = NULL;
  g_autofree char *head_cache = NULL, *signal_url = NULL;
  int tokens = 64, threads = 0, stage_threads = 0, rounds = 1;
  Netns netns = { 0 };
  gboolean pin = FALSE;
  const GOptionEntry entries[] = {
    { "model", 0, 0, G_OPTION_ARG_FILENAME, &model_arg,
      N_("A model folder with one model.safetensors (a SmolLM-135M-shaped random one)"), "DIR" },
    { "stages", 0, 0, G_OPTION_ARG_STRING, &stages_arg,
      N_("Ring sizes to measure, comma-separated (1,2,3)"), "N,N,…" },
    { "tokens", 0, 0, G_OPTION_ARG_INT, &tokens, N_("Tokens to generate (64)"), "N" },
    { "rounds", 0, 0, G_OPTION_ARG_INT, &rounds,
      N_("Rounds of every size, the order reversed every other round (1)"), "N" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads,
      N_("Threads of every device's products (default: all processors alone, half of them in a ring)"),
      "N" },
    { "stage-threads", 0, 0, G_OPTION_ARG_INT, &stage_threads,
      N_("Threads of each device of the sizes of 2 or more stages (default: as --threads)"),
      "N" },
    { "head-threads", 0, 0, G_OPTION_ARG_STRING, &head_threads_arg,
      N_("Threads of the head's final norm and head at 2 or more stages, comma-separated: "
         "each ring size runs once per value (0: as its layers; default: processors)"),
      "N,N,…" },
    { "pin-cores", 0, 0, G_OPTION_ARG_NONE, &pin,
      N_("Each device of a ring on cores of its own (one device alone: every core)"), NULL },
    { "netns", 0, 0, G_OPTION_ARG_NONE, &netns.on,
      N_("Stages in network namespaces shaped to 1 Gbit/s and 1 ms (root, ip and tc)"), NULL },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) stages = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) head_threads = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) runs = g_array_new (FALSE, FALSE, sizeof (Run));
  g_autoptr(GArray) results = g_array_new (FALSE, TRUE, sizeof (Result));
  g_autoptr(DcContext) context = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GSubprocess) signal = NULL;
  g_autoptr(GDataInputStream) signal_out = NULL;
  Hub hub = { 0 };
  int status = DC_CLI_EXIT_FAILED;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  /* Eight stages of 2 cores each is past what one machine shows. */
  if (!parse_list (stages_arg != NULL ? stages_arg : "1,2,3", 1, 8, 8, stages))
    return dc_cli_usage_error (command, _("--stages takes ring sizes of 1–8, comma-separated"));
  /* Four values: an A/B (or A/B/C/D) within one run's rounds, where the
   * host's drift between runs is larger than what is compared. */
  if (head_threads_arg != NULL && !parse_list (head_threads_arg, 0, 1024, 4, head_threads))
    return dc_cli_usage_error (command, _("--head-threads takes 1 to 4 thread counts of 0–1024, "
                                          "comma-separated"));
  if (head_threads->len == 0)
    g_array_append_val (head_threads, (guint) { MAX (1, g_get_num_processors ()) });
  for (guint i = 0; i < stages->len; i++)
    {
      guint n = g_array_index (stages, guint, i);

      for (guint k = 0; k < (n > 1 ? head_threads->len : 1); k++)
        g_array_append_val (runs, ((Run) { n, n > 1 ? g_array_index (head_threads, guint, k)
                                                    : 0 }));
    }
  if (tokens < 2 || tokens > 1024)
    return dc_cli_usage_error (command, _("--tokens must be 2–1024"));
  /* 20 rounds of three sizes is an hour on the H200 host: past that, a typo. */
  if (rounds < 1 || rounds > 20)
    return dc_cli_usage_error (command, _("--rounds must be 1–20"));
  if (threads < 0 || threads > 1024 || stage_threads < 0 || stage_threads > 1024)
    return dc_cli_usage_error (command, _("--threads must be 1–1024"));
  if (!dc_mesh_check_plugins (&error))
    return dc_cli_fail (options, error);
  model_dir = model_arg != NULL ? g_strdup (model_arg) : ensure_default_model (&error);
  if (model_dir == NULL)
    return dc_cli_fail (options, error);

  /* The Hub's address is known before any thread starts: the environment
   * is set once, here. */
  if (netns.on)
    {
      guint most = 1;

      for (guint i = 0; i < stages->len; i++)
        most = MAX (most, g_array_index (stages, guint, i));
      if (!netns_create (&netns, most, &error))
        goto out;
    }
  if (!hub_start (&hub, model_dir, netns.on ? NETNS_HEAD_ADDRESS : "127.0.0.1", &error))
    goto out;
  head_cache = g_dir_make_tmp ("dc-bench-ring-XXXXXX", &error);
  if (head_cache == NULL)
    goto out;
  g_setenv ("HF_ENDPOINT", hub.url, TRUE);
  g_setenv ("DC_MODEL_CACHE_DIR", head_cache, TRUE);
  hub.thread = g_thread_new ("dc-bench-hub", hub_thread, &hub);

  signal = spawn_cli (NULL, NULL, NULL, NULL, &error, "signal", "--json", "--port", "0", "--bind",
                      netns.on ? NETNS_HEAD_ADDRESS : "127.0.0.1", NULL);
  if (signal == NULL)
    goto out;
  signal_out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (signal));
  for (int i = 0; i < 20 && signal_url == NULL; i++)
    {
      g_autofree char *line = g_data_input_stream_read_line_utf8 (signal_out, NULL, NULL, &error);
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonNode *root;

      if (line == NULL)
        break;
      if (!json_parser_load_from_data (parser, line, -1, NULL) ||
          (root = json_parser_get_root (parser)) == NULL || !JSON_NODE_HOLDS_OBJECT (root))
        continue;
      if (g_strcmp0 (json_object_get_string_member_with_default (json_node_get_object (root),
                                                                 "event", ""), "listening") == 0)
        signal_url = g_strdup (json_object_get_string_member_with_default (
                                 json_node_get_object (root), "url", ""));
    }
  if (signal_url == NULL)
    {
      if (error == NULL)
        g_set_error (&error, G_IO_ERROR, G_IO_ERROR_FAILED,
                     "the signaling service did not start");
      goto out;
    }

  context = dc_context_new (DC_BACKEND_CPU, &error);
  if (context == NULL)
    goto out;
  repo = dc_model_repo_open (dc_context_get_hf_client (context), BENCH_REPO, NULL, &error);
  if (repo == NULL)
    goto out;
  for (guint round = 0; round < (guint) rounds; round++)
    {
      g_autofree Result *row = g_new0 (Result, runs->len);

      /* Odd rounds measure the sizes in reverse: whichever size runs
       * second in one invocation was shifted (docs/BENCHMARKS.md), so
       * each size runs first as often as last. */
      for (guint j = 0; j < runs->len; j++)
        {
          guint i = round % 2 == 0 ? j : runs->len - 1 - j;
          const Run *run = &g_array_index (runs, Run, i);
          guint n = run->stages;
          guint n_threads = threads > 0 ? (guint) threads : bench_threads (n, pin);

          /* A ring decodes one stage at a time: its devices may each take
           * more than their share of the cores (measuring). */
          guint n_head = run->head_threads;

          if (n > 1 && stage_threads > 0)
            n_threads = (guint) stage_threads;
          /* --pin-cores without --head-threads: the head's final norm and
           * head on the head's own cores, not every processor's count
           * (which would put 16 threads on its 6). */
          if (pin && n > 1 && head_threads_arg == NULL)
            {
              cpu_set_t cpus;

              device_cores (0, n, &cpus);
              n_head = (guint) CPU_COUNT (&cpus);
            }

          if (!measure (context, repo, &netns, signal_url, hub.url, n, (guint) tokens, n_threads,
                        n_head, pin, round + 1, &row[i], &error))
            goto out;
          row[i].round = round + 1;
        }
      /* Each round is printed as soon as it is measured (a run cut short
       * keeps the rounds it finished), in the order of --stages, the ratios
       * to the first size of the same round. */
      for (guint i = 0; i < runs->len; i++)
        {
          g_array_append_val (results, row[i]);
          print_result (options, &netns, &row[i], &row[0]);
        }
    }
  if (rounds > 1)
    for (guint i = 0; i < runs->len; i++)
      print_summary (options, results, runs->len, i);
  status = DC_CLI_EXIT_OK;

out:
  if (error != NULL)
    status = dc_cli_fail (options, error);
  g_clear_object (&repo);
  g_clear_object (&context);
  if (signal != NULL)
    {
      g_subprocess_send_signal (signal, SIGTERM);
      g_subprocess_wait (signal, NULL, NULL);
    }
  hub_stop (&hub);
  if (head_cache != NULL)
    remove_tree (head_cache);
  dc_cli_netns_remove (&netns.shaped);
  return status;
}
