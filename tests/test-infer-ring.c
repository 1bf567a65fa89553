/* test-infer-ring.c: a model split by layers across processes on loopback.
 *
 * A signaling service, a local Hub per process (a libsoup server on
 * loopback that counts the weight bytes it sends: HF_ENDPOINT differs per
 * process), `daisychain-cli infer --signal …` as the head and `join
 * --serve-layers` stages, each with its own cache. The memory each device
 * offers is chosen from the fixture's sizes so that the plan needs every
 * device: the head holds the embedding, head and two layers, each stage
 * two layers of llama-tiny's six.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <signal.h>
#include <unistd.h>
#include <string.h>
#include <libsoup/soup.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"
#include "infer/dc-infer-ring.h"
#include "model/dc-hf-config.h"
#include "model/dc-hf-model.h"
#include "model/dc-tensor-source-files.h"

/* Far above what an event takes on an idle machine; on a loaded 2-core
 * machine processes stall for seconds. */
#define EVENT_BOUND_MS 60000
/* A run: loading and a few dozen tokens through three processes. */
#define RUN_BOUND_MS   180000

#define MODEL "test/llama-tiny"
#define PROMPT "The ring of devices"
/* Over 32 tokens: the prefill goes round in chunks of 16, two in flight. */
#define LONG_PROMPT "Once upon a time, in a small village by the sea, there lived an old " \
                    "fisherman who told stories about a ring."

typedef struct
{
  const char *temperature;
  const char *prompt;
  const char *extra;      /* one more argument of the head's */
} Case;

/* ---- the fixture's sizes ------------------------------------------------ */

typedef struct
{
  DcHfConfig     *config;
  DcTensorSource *source;
  char           *dir;
} Fixture;

static void
fixture_open (Fixture *f)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *config_path = NULL;

  f->dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny", NULL);
  config_path = g_build_filename (f->dir, "config.json", NULL);
  f->config = dc_hf_config_new_from_file (config_path, &error);
  g_assert_no_error (error);
  f->source = dc_tensor_source_files_new (f->dir, &error);
  g_assert_no_error (error);
}

static void
fixture_close (Fixture *f)
{
  g_clear_pointer (&f->config, dc_hf_config_free);
  g_clear_object (&f->source);
  g_clear_pointer (&f->dir, g_free);
}

/* The bytes of the tensors of layers [first, last] (and the ends). */
static guint64
part_download (Fixture  *f,
               gint64    first,
               gint64    last,
               gboolean  ends)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) tensors = NULL;
  guint64 total = 0;

  tensors = dc_hf_model_list_part_tensors (f->config, f->source, (guint) first,
                                           (guint) (last + 1), ends, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < tensors->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (tensors, i);

      total += t->end - t->begin;
    }
  return total;
}

/* "MB" to offer for LAYERS layers (and the ends), with half a layer to spare. */
static char *
memory_for (Fixture  *f,
            guint     layers,
            gboolean  ends)
{
  guint64 one = dc_hf_model_part_memory_bytes (f->config, 0, 1, FALSE, 64);
  guint64 bytes = one * layers + one / 2 +
                  (ends ? dc_hf_model_part_memory_bytes (f->config, 0, 0, TRUE, 64) : 0);

  return g_strdup_printf ("%.6f", bytes / 1e6);
}

/* ---- processes ---------------------------------------------------------- */

typedef struct
{
  Fixture     fixture;
  DcTestProc *signal;
  char       *url;
  char       *room;
  DcTestHub  *hubs[4];
  char       *caches[4];
  DcTestProc *procs[4];      /* the head, then the stages */
  guint       n;
  guint       ignore_ranges_of;   /* this process's Hub ignores ranges (0: none) */
  char       *dead_hub;           /* non-NULL: the stages' HF_ENDPOINT, where nothing listens */
} Ring;

/* A loopback URL where nothing listens: a port the kernel gave and took back. */
static char *
dead_hub_url (void)
{
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GError) error = NULL;
  guint16 port;

  socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP,
                         &error);
  g_assert_no_error (error);
  g_socket_bind (socket, any, FALSE, &error);
  g_assert_no_error (error);
  bound = g_socket_get_local_address (socket, &error);
  g_assert_no_error (error);
  port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  g_socket_close (socket, NULL);
  return g_strdup_printf ("http://127.0.0.1:%u", port);
}

static DcTestProc *
spawn_with_hub (Ring       *ring,
                guint       i,
                const char *label,
                const char * const *args)
{
  if (ring->hubs[i] == NULL)   /* else warmed by ring_warm_head_cache() */
    {
      ring->hubs[i] = dc_test_hub_start (ring->ignore_ranges_of != 0 &&
                                         ring->ignore_ranges_of == i);
      ring->caches[i] = g_dir_make_tmp ("dc-ring-cache-XXXXXX", NULL);
      g_assert_nonnull (ring->caches[i]);
    }
  /* The child copies the environment when it is spawned. */
  g_setenv ("HF_ENDPOINT", i > 0 && ring->dead_hub != NULL ? ring->dead_hub
                                                           : dc_test_hub_get_url (ring->hubs[i]),
            TRUE);
  g_setenv ("DC_MODEL_CACHE_DIR", ring->caches[i], TRUE);
  return dc_test_proc_spawn (label, NULL, FALSE, args);
}

static void
ring_start_signal (Ring *ring)
{
  const char *args[] = { "signal", "--json", "--port", "0", "--bind", "127.0.0.1", NULL };
  JsonObject *listening;

  fixture_open (&ring->fixture);
  ring->signal = dc_test_proc_spawn ("signal", NULL, FALSE, args);
  listening = dc_test_proc_expect (ring->signal, "listening", NULL, EVENT_BOUND_MS);
  ring->url = g_strdup (json_object_get_string_member (listening, "url"));
}

/* The head's model cache holds the whole model before the ring starts: one
 * run on that device alone, through its Hub. Returns the weight bytes its
 * Hub sent (the whole model). */
static guint64
ring_warm_head_cache (Ring *ring)
{
  const char *args[] = { "infer", "--json", "--model", MODEL, "--prompt", PROMPT, "--tokens",
                         "1", "--context", "64", NULL };
  g_autofree char *out = NULL, *err = NULL;

  ring->hubs[0] = dc_test_hub_start (FALSE);
  ring->caches[0] = g_dir_make_tmp ("dc-ring-cache-XXXXXX", NULL);
  g_assert_nonnull (ring->caches[0]);
  g_setenv ("HF_ENDPOINT", dc_test_hub_get_url (ring->hubs[0]), TRUE);
  g_setenv ("DC_MODEL_CACHE_DIR", ring->caches[0], TRUE);
  g_assert_cmpint (dc_test_run_cli (args, &out, &err, RUN_BOUND_MS), ==, 0);
  g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring->hubs[0]), ==,
                    part_download (&ring->fixture, 0, 5, TRUE));
  return dc_test_hub_get_weight_bytes (ring->hubs[0]);
}

/* The head: generates TOKENS at TEMPERATURE once MIN_PEERS devices are there. */
static void
ring_start_head (Ring       *ring,
                 const char *min_peers,
                 const char *temperature,
                 const char *prompt,
                 const char *extra)
{
  g_autofree char *memory = memory_for (&ring->fixture, 2, TRUE);
  const char *args[] = { "infer", "--json", "--model", MODEL, "--prompt", prompt,
                         "--tokens", "24", "--context", "64", "--temperature", temperature,
                         "--seed", "7", "--signal", ring->url, "--name", "alpha",
                         "--approve", "all", "--ice-address", "127.0.0.1",
                         "--min-peers", min_peers, "--memory-mb", memory, "--verify",
                         extra, NULL };
  JsonObject *event;

  ring->procs[0] = spawn_with_hub (ring, 0, "alpha", args);
  event = dc_test_proc_expect (ring->procs[0], "room", NULL, EVENT_BOUND_MS);
  ring->room = g_strdup (json_object_get_string_member (event, "room"));
  /* The head must have created the room before anyone asks to join it. */
  dc_test_proc_expect (ring->procs[0], "joined", NULL, EVENT_BOUND_MS);
  ring->n = 1;
}

static void
ring_add_stage (Ring       *ring,
                const char *name,
                const char *extra,
                const char *extra2)
{
  g_autofree char *memory = memory_for (&ring->fixture, 2, FALSE);
  const char *args[] = { "join", "--json", "--serve-layers", "--signal", ring->url,
                         "--room", ring->room, "--name", name, "--ice-address", "127.0.0.1",
                         "--memory-mb", memory, extra, extra2, NULL };
  guint i = ring->n++;

  ring->procs[i] = spawn_with_hub (ring, i, name, args);
}

static void
ring_stop (Ring *ring)
{
  for (guint i = 0; i < ring->n; i++)
    {
      if (!ring->procs[i]->exited)
        g_subprocess_send_signal (ring->procs[i]->process, SIGTERM);
      dc_test_proc_expect_exit (ring->procs[i], EVENT_BOUND_MS);
      g_clear_pointer (&ring->procs[i], dc_test_proc_free);
      dc_test_hub_stop (ring->hubs[i]);
      dc_test_remove_tree (ring->caches[i]);
      g_free (ring->caches[i]);
    }
  g_subprocess_send_signal (ring->signal->process, SIGTERM);
  g_clear_pointer (&ring->signal, dc_test_proc_free);
  g_free (ring->url);
  g_free (ring->room);
  g_free (ring->dead_hub);
  fixture_close (&ring->fixture);
  g_unsetenv ("HF_ENDPOINT");
  g_unsetenv ("DC_MODEL_CACHE_DIR");
}

/* The ids `infer` gives on one device, from the fixture folder. */
static JsonArray *
single_device_ids (const char  *temperature,
                   const char  *prompt,
                   JsonParser **keep)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  NULL);
  const char *args[] = { "infer", "--json", "--model", dir, "--prompt", prompt, "--tokens", "24",
                         "--context", "64", "--temperature", temperature, "--seed", "7", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr(GError) error = NULL;
  JsonParser *parser = json_parser_new ();

  g_assert_cmpint (dc_test_run_cli (args, &out, &err, RUN_BOUND_MS), ==, 0);
  json_parser_load_from_data (parser, out, -1, &error);
  g_assert_no_error (error);
  *keep = parser;
  return json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)),
                                       "ids");
}

static void
assert_same_ids (JsonArray *a,
                 JsonArray *b)
{
  g_assert_cmpuint (json_array_get_length (a), ==, json_array_get_length (b));
  g_assert_cmpuint (json_array_get_length (a), >, 0);
  for (guint i = 0; i < json_array_get_length (a); i++)
    g_assert_cmpint (json_array_get_int_element (a, i), ==, json_array_get_int_element (b, i));
}

/* The plan's stage named NAME: its layers [first, last] and whether it has the ends. */
static gboolean
plan_stage (JsonObject *result,
            const char *name,
            gint64     *first,
            gint64     *last)
{
  JsonArray *plan = json_object_get_array_member (result, "plan");

  for (guint i = 0; i < json_array_get_length (plan); i++)
    {
      JsonObject *s = json_array_get_object_element (plan, i);
      JsonArray *layers = json_object_get_array_member (s, "layers");

      if (!g_str_equal (json_object_get_string_member (s, "name"), name))
        continue;
      *first = json_array_get_length (layers) == 2 ? json_array_get_int_element (layers, 0) : 0;
      *last = json_array_get_length (layers) == 2 ? json_array_get_int_element (layers, 1) : -1;
      return TRUE;
    }
  return FALSE;
}

/* The weight bytes the head says it sent the plan's stage NAME. */
static gint64
plan_served (JsonObject *result,
             const char *name)
{
  JsonArray *plan = json_object_get_array_member (result, "plan");

  for (guint i = 0; i < json_array_get_length (plan); i++)
    {
      JsonObject *s = json_array_get_object_element (plan, i);

      if (g_str_equal (json_object_get_string_member (s, "name"), name))
        return json_object_get_int_member (s, "served_bytes");
    }
  g_assert_not_reached ();
}

/* ---- the cases ---------------------------------------------------------- */

static void
check_three (gconstpointer data)
{
  const Case *c = data;
  g_autoptr(JsonParser) keep = NULL;
  JsonArray *alone = single_device_ids (c->temperature, c->prompt, &keep);
  Ring ring = { { 0 } };
  JsonObject *result, *verify, *plan;
  const char *names[] = { "alpha", "beta", "gamma" };

  ring_start_signal (&ring);
  ring_start_head (&ring, "3", c->temperature, c->prompt, c->extra);
  ring_add_stage (&ring, "beta", NULL, NULL);
  ring_add_stage (&ring, "gamma", NULL, NULL);

  /* The plan's hop cost was measured (pings to both stages), not assumed. */
  plan = dc_test_proc_expect (ring.procs[0], "plan", NULL, RUN_BOUND_MS);
  g_assert_true (json_object_get_boolean_member (plan, "hop_measured"));
  g_assert_cmpfloat (json_object_get_double_member (plan, "hop_ms"), >, 0.0);
  result = dc_test_proc_expect (ring.procs[0], "result", NULL, RUN_BOUND_MS);
  verify = dc_test_proc_expect (ring.procs[0], "verify", NULL, 1);
  g_assert_cmpstr (json_object_get_string_member (verify, "message"), ==,
                   "VERIFIED: the distributed run and the single-device run produced "
                   "identical token ids");
  g_assert_true (json_object_get_boolean_member (result, "verified"));
  g_assert_false (json_object_get_boolean_member (result, "replayed"));
  /* Three devices, six layers: every device holds two. */
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (result, "plan")), ==, 3);
  assert_same_ids (json_object_get_array_member (result, "ids"), alone);
  if (c->prompt == (const char *) LONG_PROMPT)
    g_assert_cmpint (json_object_get_int_member (result, "prompt_tokens"), >, 32);
  /* With draft spans (greedy llama-tiny repeats itself) some laps were
   * saved: spans scored in one lap, cut back on every stage when rejected,
   * and still the ids of one device. */
  if (c->extra != NULL)
    g_assert_cmpint (json_object_get_int_member (result, "draft_accepted"), >, 0);
  else
    g_assert_cmpint (json_object_get_int_member (result, "draft_proposed"), ==, 0);
  g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 0);

  /* Every stage saw the tokens stream, and fetched only its layers. */
  for (guint i = 0; i < 3; i++)
    {
      gint64 first = 0, last = -1;
      guint64 expect;

      g_assert_true (plan_stage (result, names[i], &first, &last));
      g_assert_cmpint (last - first + 1, ==, 2);
      expect = part_download (&ring.fixture, first, last, i == 0);
      if (i > 0)
        {
          JsonObject *loaded = dc_test_proc_expect (ring.procs[i], "ring-loaded", NULL, 1);

          g_assert_cmpint (json_object_get_int_member (loaded, "value"), ==, (gint64) expect);
          dc_test_proc_expect (ring.procs[i], "ring-token", NULL, EVENT_BOUND_MS);
          continue;
        }
      /* The head also fetched the rest for Verify: all of it, each byte once. */
      g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring.hubs[0]), ==,
                        part_download (&ring.fixture, 0, 5, TRUE));
    }
  for (guint i = 1; i < 3; i++)
    {
      gint64 first = 0, last = -1;

      g_assert_true (plan_stage (result, names[i], &first, &last));
      g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring.hubs[i]), ==,
                        part_download (&ring.fixture, first, last, FALSE));
    }
  ring_stop (&ring);
}

/* A stage that vanishes mid-generation: one replay on the devices left,
 * with the same ids; a second loss stops with a clear message. Four
 * devices whose claimed speeds fix the plan: beta and gamma are in it (the
 * fastest), delta (the slowest) is the spare the replay uses. */
static void
check_stage_lost (gconstpointer data)
{
  gboolean twice = GPOINTER_TO_INT (data);
  g_autoptr(JsonParser) keep = NULL;
  JsonArray *alone = single_device_ids ("0", PROMPT, &keep);
  Ring ring = { { 0 } };
  JsonObject *result, *replay, *error;
  gint64 first, last;

  ring_start_signal (&ring);
  ring_start_head (&ring, "4", "0", PROMPT, NULL);
  ring_add_stage (&ring, "beta", "--test-gmacs=100", "--test-exit-after-hops=6");
  ring_add_stage (&ring, "gamma", "--test-gmacs=50", NULL);
  ring_add_stage (&ring, "delta", "--test-gmacs=0.001",
                  twice ? "--test-exit-after-hops=3" : NULL);

  replay = dc_test_proc_expect (ring.procs[0], "replay", NULL, RUN_BOUND_MS);
  g_assert_cmpstr (json_object_get_string_member (replay, "message"), ==,
                   "a peer left the ring: “beta”");
  dc_test_proc_expect (ring.procs[1], "test-exit", NULL, 1);
  if (twice)
    {
      error = dc_test_proc_expect (ring.procs[0], "error", NULL, RUN_BOUND_MS);
      g_assert_cmpstr (json_object_get_string_member (error, "message"), ==,
                       "a peer left the ring: “delta” (after one replay; run it again)");
      g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 1);
      ring_stop (&ring);
      return;
    }
  result = dc_test_proc_expect (ring.procs[0], "result", NULL, RUN_BOUND_MS);
  g_assert_true (json_object_get_boolean_member (result, "replayed"));
  g_assert_true (json_object_get_boolean_member (result, "verified"));
  assert_same_ids (json_object_get_array_member (result, "ids"), alone);
  /* The replay's plan: the head, gamma and the spare. */
  g_assert_false (plan_stage (result, "beta", &first, &last));
  g_assert_true (plan_stage (result, "gamma", &first, &last));
  g_assert_true (plan_stage (result, "delta", &first, &last));
  g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 0);
  ring_stop (&ring);
}

/* Hops the stage must not use: it says why and the head stops with it. */
static void
check_refused (gconstpointer data)
{
  const char *fault = data;
  g_autofree char *arg = g_strdup_printf ("--test-hop-fault=%s", fault);
  Ring ring = { { 0 } };
  JsonObject *refused, *error;
  const char *says;

  ring_start_signal (&ring);
  ring_start_head (&ring, "3", "0", PROMPT, arg);
  ring_add_stage (&ring, "beta", NULL, NULL);
  ring_add_stage (&ring, "gamma", NULL, NULL);

  error = dc_test_proc_expect (ring.procs[0], "error", NULL, RUN_BOUND_MS);
  says = g_str_equal (fault, "nan") ? "REFUSED activation from “alpha”: a non-finite value"
                                    : "REFUSED activation from “alpha”: it belongs to model "
                                      "test/another-model";
  g_assert_true (g_str_has_prefix (json_object_get_string_member (error, "message"), says));
  g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 1);
  /* The stage that got it (the first after the head) refused it. */
  refused = NULL;
  for (guint i = 1; i < 3 && refused == NULL; i++)
    if (dc_test_proc_find (ring.procs[i], 0, "ring-refused", NULL) >= 0)
      refused = g_ptr_array_index (ring.procs[i]->events,
                                   dc_test_proc_find (ring.procs[i], 0, "ring-refused", NULL));
  g_assert_nonnull (refused);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (refused, "detail"), says));
  ring_stop (&ring);
}

enum
{
  HEAD_SERVES,       /* the stages' Hubs are there but unused */
  HEAD_LIES,         /* weight bytes that do not match their sha256 */
  HEAD_LIES_FILES,   /* config.json, … that do not match theirs */
  NO_STAGE_HUB,      /* the stages' Hub URL points where nothing listens */
};

/* The head has the model cached: the stages fetch their layers' bytes from
 * it over the ring's channels, and their Hubs send no weight byte; each
 * stage received exactly its own layers' bytes, and the ids are one
 * device's. A head whose bytes do not match the sha256 it sends with them
 * (HEAD_LIES) is refused: the stages say so and use their Hubs, and the run
 * is still right; so is one whose model files (config.json, the tokenizer,
 * the headers) do not match (HEAD_LIES_FILES). With NO_STAGE_HUB the stages
 * read those files from the head too, so they need no Hub at all. */
static void
check_head_cache (gconstpointer data)
{
  int mode = GPOINTER_TO_INT (data);
  gboolean lie = mode == HEAD_LIES || mode == HEAD_LIES_FILES;
  g_autoptr(JsonParser) keep = NULL;
  JsonArray *alone = single_device_ids ("0", PROMPT, &keep);
  Ring ring = { { 0 } };
  JsonObject *result, *verify;
  const char *names[] = { "alpha", "beta", "gamma" };
  guint64 warm;

  ring_start_signal (&ring);
  warm = ring_warm_head_cache (&ring);
  if (mode == NO_STAGE_HUB)
    ring.dead_hub = dead_hub_url ();
  ring_start_head (&ring, "3", "0", PROMPT,
                   mode == HEAD_LIES ? "--test-serve-lie"
                   : mode == HEAD_LIES_FILES ? "--test-serve-lie-files" : NULL);
  ring_add_stage (&ring, "beta", NULL, NULL);
  ring_add_stage (&ring, "gamma", NULL, NULL);

  result = dc_test_proc_expect (ring.procs[0], "result", NULL, RUN_BOUND_MS);
  verify = dc_test_proc_expect (ring.procs[0], "verify", NULL, 1);
  g_assert_cmpstr (json_object_get_string_member (verify, "message"), ==,
                   "VERIFIED: the distributed run and the single-device run produced "
                   "identical token ids");
  assert_same_ids (json_object_get_array_member (result, "ids"), alone);
  g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 0);
  /* The head ran from its cache: its Hub sent nothing more. */
  g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring.hubs[0]), ==, warm);

  for (guint i = 1; i < 3; i++)
    {
      gint64 first = 0, last = -1;
      guint64 expect;
      JsonObject *loaded, *refused;
      int from, refused_at;

      g_assert_true (plan_stage (result, names[i], &first, &last));
      expect = part_download (&ring.fixture, first, last, FALSE);
      loaded = dc_test_proc_expect (ring.procs[i], "ring-loaded", NULL, 1);
      g_assert_cmpint (json_object_get_int_member (loaded, "value"), ==, (gint64) expect);
      from = dc_test_proc_find (ring.procs[i], 0, "ring-from-head", NULL);
      refused_at = dc_test_proc_find (ring.procs[i], 0, "ring-head-refused", NULL);
      if (!lie)
        {
          /* All from the head, only its layers, none from the Hub. */
          g_assert_cmpint (from, >=, 0);
          g_assert_cmpint (refused_at, <, 0);
          g_assert_cmpint (json_object_get_int_member (g_ptr_array_index (ring.procs[i]->events,
                                                                          from), "value"),
                           ==, (gint64) expect);
          g_assert_cmpint (plan_served (result, names[i]), ==, (gint64) expect);
          g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring.hubs[i]), ==, 0);
          continue;
        }
      g_assert_cmpint (from, <, 0);
      g_assert_cmpint (refused_at, >=, 0);
      refused = g_ptr_array_index (ring.procs[i]->events, refused_at);
      /* The first file a stage reads is config.json. */
      g_assert_true (g_str_has_prefix (json_object_get_string_member (refused, "detail"),
                                       mode == HEAD_LIES
                                       ? "REFUSED bytes from the head “alpha”: bytes "
                                       : "REFUSED config.json from the head “alpha”: bytes "));
      g_assert_nonnull (strstr (json_object_get_string_member (refused, "detail"),
                                "do not match the sha256 sent with them"));
      g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring.hubs[i]), ==, expect);
    }
  ring_stop (&ring);
}

/* A stage whose Hub sends whole files for byte ranges refuses them, as one
 * device does; the head stops naming it. */
static void
test_stage_range_refused (void)
{
  Ring ring = { { 0 } };
  JsonObject *error, *failed;

  ring.ignore_ranges_of = 2;
  ring_start_signal (&ring);
  ring_start_head (&ring, "3", "0", PROMPT, NULL);
  ring_add_stage (&ring, "beta", NULL, NULL);
  ring_add_stage (&ring, "gamma", NULL, NULL);

  error = dc_test_proc_expect (ring.procs[0], "error", NULL, RUN_BOUND_MS);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (error, "message"),
                                   "“gamma” cannot run its layers: "));
  g_assert_nonnull (strstr (json_object_get_string_member (error, "message"),
                            "ignored the byte range"));
  failed = dc_test_proc_expect (ring.procs[2], "ring-failed", NULL, 1);
  g_assert_nonnull (strstr (json_object_get_string_member (failed, "detail"),
                            "ignored the byte range"));
  g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 1);
  ring_stop (&ring);
}

/* A stage whose kernel probe hash differs gets no layers; without it the
 * others cannot hold the model, which the plan says instead of overfilling. */
static void
test_probe_mismatch (void)
{
  Ring ring = { { 0 } };
  JsonObject *error;

  ring_start_signal (&ring);
  ring_start_head (&ring, "3", "0", PROMPT, NULL);
  ring_add_stage (&ring, "beta", NULL, NULL);
  ring_add_stage (&ring, "gamma", "--probe-hash=0123abcd", NULL);

  /* The failure names who was left out and why. */
  error = dc_test_proc_expect (ring.procs[0], "error", NULL, RUN_BOUND_MS);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (error, "message"),
                                   "the group cannot hold the model: its devices hold 4 of its 6 "
                                   "layers; add a device or pick a smaller model (“gamma” stays "
                                   "out of the plan: kernel probe 0123abcd differs from this "
                                   "device's "));
  g_assert_cmpint (dc_test_proc_expect_exit (ring.procs[0], EVENT_BOUND_MS), ==, 1);
  /* Nothing was assigned, so nothing was downloaded. */
  g_assert_cmpint (dc_test_proc_find (ring.procs[2], 0, "ring-assigned", NULL), <, 0);
  g_assert_cmpuint (dc_test_hub_get_weight_bytes (ring.hubs[2]), ==, 0);
  ring_stop (&ring);
}

/* `bench ring` on the fixture: one object per ring size, in order, with
 * positive rates, the ratio to one device 1 for the first, and the plan
 * using exactly the stages asked. No figure is checked. */
static void
test_bench_shape (void)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  NULL);
  const char *args[] = { "bench", "ring", "--json", "--model", dir, "--stages", "1,3",
                         "--tokens", "4", "--rounds", "2", "--stage-threads", "3", NULL };
  const char *bad[] = { "bench", "ring", "--stages", "0", NULL };
  const char *bad_stage_threads[] = { "bench", "ring", "--stage-threads", "2000", NULL };
  const char *bad_rounds[] = { "bench", "ring", "--rounds", "0", NULL };
  const char *bad_threads[] = { "bench", "ring", "--threads", "2000", NULL };
  const char *join_threads[] = { "join", "--threads", "4", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_cmpint (dc_test_run_cli (bad, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  g_assert_cmpint (dc_test_run_cli (bad_threads, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  g_assert_cmpint (dc_test_run_cli (bad_stage_threads, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  g_assert_cmpint (dc_test_run_cli (bad_rounds, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  /* --threads is a stage's: without --serve-layers it is a usage error. */
  g_assert_cmpint (dc_test_run_cli (join_threads, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  /* Every decoded token's hop on the stages' main threads, whatever the
   * machine's speed (the stages inherit the environment). */
  g_setenv ("DC_RING_INLINE_US", "1000000", TRUE);
  g_assert_cmpint (dc_test_run_cli (args, &out, &err, RUN_BOUND_MS), ==, 0);
  g_unsetenv ("DC_RING_INLINE_US");
  /* Two rounds (1, 3 measured in that order, then 3, 1), each printed in
   * the order of --stages, then one summary per size. */
  lines = g_strsplit (g_strstrip (out), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 6);
  for (guint k = 4; k < 6; k++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;
      JsonObject *o;
      double median, lo, hi;

      json_parser_load_from_data (parser, lines[k], -1, &error);
      g_assert_no_error (error);
      o = json_node_get_object (json_parser_get_root (parser));
      g_assert_true (json_object_get_boolean_member (o, "summary"));
      g_assert_cmpint (json_object_get_int_member (o, "stages"), ==, k == 4 ? 1 : 3);
      g_assert_cmpint (json_object_get_int_member (o, "rounds"), ==, 2);
      median = json_object_get_double_member (o, "decode_tok_s_median");
      lo = json_object_get_double_member (o, "decode_tok_s_min");
      hi = json_object_get_double_member (o, "decode_tok_s_max");
      g_assert_cmpfloat (lo, >, 0);
      g_assert_cmpfloat (lo, <=, median);
      g_assert_cmpfloat (median, <=, hi);
      g_assert_cmpfloat (json_object_get_double_member (o, "lap_ms_median"), >, 0);
      if (k == 4)
        g_assert_cmpfloat (json_object_get_double_member (o, "decode_ratio_of_medians"), ==, 1.0);
      else
        g_assert_cmpfloat (json_object_get_double_member (o, "decode_ratio_of_medians"), >, 0);
    }
  for (guint k = 0; k < 4; k++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;
      JsonObject *o;
      guint i = k % 2;

      json_parser_load_from_data (parser, lines[k], -1, &error);
      g_assert_no_error (error);
      o = json_node_get_object (json_parser_get_root (parser));
      g_assert_cmpint (json_object_get_int_member (o, "round"), ==, k / 2 + 1);
      g_assert_cmpint (json_object_get_int_member (o, "stages"), ==, i == 0 ? 1 : 3);
      g_assert_cmpint (json_object_get_int_member (o, "tokens"), ==, 4);
      /* One device alone takes every processor; --stage-threads sets the
       * 3-stage ring's devices' threads. */
      g_assert_cmpint (json_object_get_int_member (o, "threads"), ==,
                       i == 0 ? MAX (1, g_get_num_processors ()) : 3);
      g_assert_cmpfloat (json_object_get_double_member (o, "prefill_tok_s"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "decode_tok_s"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "lap_estimate_ms"), >, 0);
      if (i == 0)
        {
          g_assert_cmpfloat (json_object_get_double_member (o, "decode_ratio"), ==, 1.0);
          g_assert_false (json_object_has_member (o, "stage_hops"));
          continue;
        }
      /* Where a decoded token's wait went: the head's two hand-offs, each
       * stage's queue, compute and send (written by the stage's process),
       * and the rest, the transport. */
      {
        JsonArray *hops = json_object_get_array_member (o, "stage_hops");

        g_assert_cmpfloat (json_object_get_double_member (o, "head_send_ms"), >, 0);
        g_assert_cmpfloat (json_object_get_double_member (o, "head_wake_ms"), >=, 0);
        g_assert_true (json_object_has_member (o, "transport_ms"));
        /* The answers' and hops' way from webrtcbin's signal to our
         * handlers, a part of the transport. */
        g_assert_cmpfloat (json_object_get_double_member (o, "head_receive_ms"), >=, 0);
        g_assert_cmpfloat (json_object_get_double_member (o, "receive_handoff_ms"), >=,
                           json_object_get_double_member (o, "head_receive_ms"));
        g_assert_cmpuint (json_array_get_length (hops), ==, 2);
        for (guint h = 0; h < 2; h++)
          {
            JsonObject *stage = json_array_get_object_element (hops, h);

            g_assert_cmpint (json_object_get_int_member (stage, "stage"), ==, h + 1);
            /* Three decoded tokens after the first, each computed at once
             * on the main thread. */
            g_assert_cmpint (json_object_get_int_member (stage, "hops"), ==, 3);
            g_assert_cmpint (json_object_get_int_member (stage, "inline_hops"), ==, 3);
            g_assert_cmpfloat (json_object_get_double_member (stage, "queue_ms"), >=, 0);
            g_assert_cmpfloat (json_object_get_double_member (stage, "compute_ms"), >, 0);
            g_assert_cmpfloat (json_object_get_double_member (stage, "send_ms"), >=, 0);
            g_assert_cmpfloat (json_object_get_double_member (stage, "receive_ms"), >=, 0);
          }
      }
    }
}

/* `bench ring --head-threads A,B`: each ring size of two or more runs
 * once per value in a round (an A/B within one run), the head's final
 * norm and head on that many threads (0: as its layers), every line
 * with the ids of one device (same_ids: the products are exact on any
 * thread count), and a decoded token's compute split: the head's layers
 * and head, the session's work between tokens, and each stage's time per
 * layer. No figure is checked. */
static void
test_bench_head_threads (void)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  NULL);
  const char *args[] = { "bench", "ring", "--json", "--model", dir, "--stages", "1,3",
                         "--tokens", "4", "--stage-threads", "1", "--head-threads", "3,0",
                         NULL };
  const char *too_many[] = { "bench", "ring", "--head-threads", "1,2,3,4,5", NULL };
  const char *too_large[] = { "bench", "ring", "--head-threads", "2000", NULL };
  const gint64 head_threads[] = { MAX (1, g_get_num_processors ()), 3, 1 };
  g_autofree char *out = NULL, *err = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_cmpint (dc_test_run_cli (too_many, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  g_assert_cmpint (dc_test_run_cli (too_large, NULL, NULL, EVENT_BOUND_MS), ==, 2);
  g_setenv ("DC_RING_INLINE_US", "1000000", TRUE);
  g_assert_cmpint (dc_test_run_cli (args, &out, &err, RUN_BOUND_MS), ==, 0);
  g_unsetenv ("DC_RING_INLINE_US");
  /* One round: one device, then the 3-stage ring with the head's head on
   * 3 threads, then on its layers' 1. */
  lines = g_strsplit (g_strstrip (out), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 3);
  for (guint k = 0; k < 3; k++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;
      JsonObject *o;

      json_parser_load_from_data (parser, lines[k], -1, &error);
      g_assert_no_error (error);
      o = json_node_get_object (json_parser_get_root (parser));
      g_assert_cmpint (json_object_get_int_member (o, "stages"), ==, k == 0 ? 1 : 3);
      g_assert_cmpint (json_object_get_int_member (o, "head_threads"), ==, head_threads[k]);
      g_assert_true (json_object_get_boolean_member (o, "same_ids"));
      g_assert_cmpfloat (json_object_get_double_member (o, "head_layers_ms"), >, 0);
      /* llama-tiny's head is microseconds: a fast machine may round it to 0. */
      g_assert_cmpfloat (json_object_get_double_member (o, "head_lm_ms"), >=, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "head_between_ms"), >=, 0);
      /* The head holds all six layers alone, two in the ring. */
      g_assert_cmpfloat (json_object_get_double_member (o, "head_layer_ms"), ==,
                         json_object_get_double_member (o, "head_layers_ms") / (k == 0 ? 6 : 2));
      g_assert_cmpfloat (json_object_get_double_member (o, "head_layers_ms") +
                         json_object_get_double_member (o, "head_lm_ms"), <=,
                         json_object_get_double_member (o, "head_compute_ms") * 1.000001);
      if (k == 0)
        continue;
      g_assert_cmpint (json_object_get_int_member (o, "head_helper_wakes"), >=, 0);
      for (guint h = 0; h < 2; h++)
        {
          JsonObject *stage = json_array_get_object_element (
            json_object_get_array_member (o, "stage_hops"), h);

          g_assert_cmpfloat (json_object_get_double_member (stage, "layer_ms"), ==,
                             json_object_get_double_member (stage, "compute_ms") / 2);
          g_assert_cmpint (json_object_get_int_member (stage, "helper_wakes"), >=, 0);
          g_assert_cmpfloat (json_object_get_double_member (stage, "helper_wake_ms"), >=, 0);
        }
    }
}

/* `bench ring --pin-cores`: a ring's devices each on cores of their own
 * (the head the first share, each stage the next; one core each, round the
 * ring, when there are fewer cores than devices), one device alone on all
 * of them. With DC_RING_SCHED=1 a line per size names every thread that
 * ran in the decode with the processor it last ran on: each of the
 * 3-stage ring's threads ran on its own device's cores. The head's final
 * norm and head take its cores' count (no --head-threads), and the ids
 * are one device's. */
static void
pin_cores_expected (guint      k,
                    guint      n,
                    gboolean  *out,
                    guint      n_cores)
{
  guint first = (k * n_cores + n - 1) / n, last = ((k + 1) * n_cores + n - 1) / n;

  for (guint c = 0; c < n_cores; c++)
    out[c] = n >= n_cores ? c == k % n_cores : c >= first && c < last;
}

static void
test_bench_pin_cores (void)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  NULL);
  const char *args[] = { "bench", "ring", "--json", "--model", dir, "--stages", "1,3",
                         "--tokens", "4", "--pin-cores", NULL };
  guint n_cores = MAX (1, g_get_num_processors ());
  g_autofree gboolean *head = g_new0 (gboolean, n_cores);
  g_autofree char *out = NULL, *err = NULL;
  g_auto(GStrv) lines = NULL;
  guint head_count = 0, n_sched = 0, n_results = 0;

  pin_cores_expected (0, 3, head, n_cores);
  for (guint c = 0; c < n_cores; c++)
    head_count += head[c];
  g_setenv ("DC_RING_INLINE_US", "1000000", TRUE);
  g_setenv ("DC_RING_SCHED", "1", TRUE);
  g_assert_cmpint (dc_test_run_cli (args, &out, &err, RUN_BOUND_MS), ==, 0);
  g_unsetenv ("DC_RING_SCHED");
  g_unsetenv ("DC_RING_INLINE_US");
  lines = g_strsplit (g_strstrip (out), "\n", -1);
  for (guint k = 0; lines[k] != NULL; k++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;
      JsonObject *o;
      guint stages;

      json_parser_load_from_data (parser, lines[k], -1, &error);
      g_assert_no_error (error);
      o = json_node_get_object (json_parser_get_root (parser));
      stages = (guint) json_object_get_int_member (o, "stages");
      if (json_object_has_member (o, "sched"))
        {
          JsonArray *pids = json_object_get_array_member (o, "pids");
          JsonArray *threads = json_object_get_array_member (o, "threads");

          n_sched++;
          g_assert_cmpuint (json_array_get_length (pids), ==, stages);
          /* One device's few tokens may fall between two ticks; a ring's
           * hops switch threads. */
          if (stages == 1)
            continue;
          g_assert_cmpuint (json_array_get_length (threads), >, 0);
          for (guint t = 0; t < json_array_get_length (threads); t++)
            {
              JsonObject *thread = json_array_get_object_element (threads, t);
              gint64 pid = json_object_get_int_member (thread, "pid");
              gint64 cpu = json_object_get_int_member (thread, "cpu_last");
              g_autofree gboolean *mine = g_new0 (gboolean, n_cores);
              guint device = G_MAXUINT;

              for (guint i = 0; i < stages; i++)
                if (json_array_get_int_element (pids, i) == pid)
                  device = i;
              g_assert_cmpuint (device, <, stages);
              pin_cores_expected (device, stages, mine, n_cores);
              g_assert_cmpint (cpu, >=, 0);
              g_assert_cmpint (cpu, <, n_cores);
              if (!mine[cpu])
                g_error ("device %u's thread “%s” ran on processor %" G_GINT64_FORMAT,
                         device, json_object_get_string_member (thread, "comm"), cpu);
              g_assert_cmpfloat (json_object_get_double_member (thread, "run_ms"), >=, 0);
              g_assert_true (json_object_get_int_member (thread, "slices") > 0 ||
                             json_object_get_double_member (thread, "run_ms") > 0);
            }
          continue;
        }
      n_results++;
      g_assert_true (json_object_get_boolean_member (o, "same_ids"));
      g_assert_cmpfloat (json_object_get_double_member (o, "head_job_wakes"), >=, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "head_warm_wakes"), >=, 0);
      if (stages == 1)
        {
          g_assert_false (json_object_has_member (o, "pinned_cores"));
          g_assert_cmpint (json_object_get_int_member (o, "head_threads"), ==, n_cores);
          continue;
        }
      g_assert_cmpint (json_object_get_int_member (o, "pinned_cores"), ==, head_count);
      g_assert_cmpint (json_object_get_int_member (o, "head_threads"), ==, head_count);
      /* Pinned, a device computes with its own share of the cores. */
      g_assert_cmpint (json_object_get_int_member (o, "threads"), ==, MAX (1, n_cores / 3));
      for (guint h = 0; h < 2; h++)
        g_assert_cmpint (json_object_get_int_member (json_array_get_object_element (
                           json_object_get_array_member (o, "stage_hops"), h), "job_wakes"),
                         >=, 0);
    }
  g_assert_cmpuint (n_sched, ==, 2);
  g_assert_cmpuint (n_results, ==, 2);
}

/* `bench ring --netns`: the stages in network namespaces shaped to 1 Gbit/s
 * and 1 ms (netem, or tbf and the delay hub), the network and its shaping
 * named in every line, a measured hop at least the delay,
 * the shaped goal given for a ring of two, and the namespaces gone after.
 * Needs root and iproute2 (skipped otherwise). No figure is checked. */
static void
test_bench_netns (void)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  NULL);
  g_autofree char *ip = g_find_program_in_path ("ip");
  g_autofree char *tc = g_find_program_in_path ("tc");
  const char *args[] = { "bench", "ring", "--json", "--netns", "--model", dir, "--stages", "1,2",
                         "--tokens", "4", NULL };
  const char *list[] = { "ip", "netns", "list", NULL };
  g_autofree char *out = NULL, *err = NULL, *before = NULL, *after = NULL;
  g_auto(GStrv) lines = NULL;
  const char *shaping;
  int status = 0;

  if (getuid () != 0 || ip == NULL || tc == NULL)
    {
      g_test_skip ("bench ring --netns needs root, ip and tc");
      return;
    }
  g_assert_true (dc_test_spawn (list, &before, NULL, &status, EVENT_BOUND_MS));
  g_assert_cmpint (dc_test_run_cli (args, &out, &err, RUN_BOUND_MS), ==, 0);
  lines = g_strsplit (g_strstrip (out), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  for (guint i = 0; i < 2; i++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;
      JsonObject *o;

      json_parser_load_from_data (parser, lines[i], -1, &error);
      g_assert_no_error (error);
      o = json_node_get_object (json_parser_get_root (parser));
      g_assert_true (g_str_has_prefix (json_object_get_string_member (o, "network"), "netns-"));
      g_assert_cmpfloat (json_object_get_double_member (o, "decode_tok_s"), >, 0);
      g_assert_true (json_object_has_member (o, "goal_ms") == (i == 1));
      if (i == 1)
        g_assert_cmpfloat (json_object_get_double_member (o, "hop_ms"), >, 0);
      /* One device takes every processor; each of a ring's, half of them (at
       * most two compute at once). */
      g_assert_cmpint (json_object_get_int_member (o, "threads"), ==,
                       MAX (1, (gint) g_get_num_processors () / (i == 0 ? 1 : 2)));
      /* With the 1 ms (netem, or the delay hub where the kernel has no
       * netem) a ping crosses twice: half its round trip, hop_ms, is at
       * least the delay (a lower bound). */
      shaping = json_object_get_string_member_with_default (o, "shaping", "");
      g_test_message ("shaping %s, network %s, hop_ms %g", shaping,
                      json_object_get_string_member (o, "network"),
                      json_object_get_double_member_with_default (o, "hop_ms", -1));
      g_assert_true (g_str_equal (shaping, "netem") || g_str_equal (shaping, "hub")
                     || g_str_equal (shaping, "hub-delay") || g_str_equal (shaping, "tbf")
                     || g_str_equal (shaping, "none"));
      if (g_str_equal (shaping, "netem") || g_str_equal (shaping, "hub"))
        g_assert_cmpstr (json_object_get_string_member (o, "network"), ==, "netns-1gbit-1ms");
      if (i == 1 && (g_str_equal (shaping, "netem") || g_str_equal (shaping, "hub")))
        g_assert_cmpfloat (json_object_get_double_member (o, "hop_ms"), >=, 1.0);
      if (g_str_equal (shaping, "hub"))
        {
          JsonObject *hub = json_object_get_object_member (o, "hub");

          g_assert_nonnull (hub);
          g_assert_cmpint (json_object_get_int_member (hub, "released"), >, 0);
          g_assert_cmpfloat (json_object_get_double_member (hub, "min_hold_us"), >=, 1000.0);
        }
    }
  g_assert_true (dc_test_spawn (list, &after, NULL, &status, EVENT_BOUND_MS));
  g_assert_cmpstr (after, ==, before);
}

/* A bench's devices sharing one host: one alone takes every processor, a
 * ring's each half (at most two of them compute at once), never 0. */
static void
test_shared_host_threads (void)
{
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (16, 1), ==, 16);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (16, 2), ==, 8);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (16, 3), ==, 8);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (16, 8), ==, 8);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (7, 3), ==, 3);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (1, 3), ==, 1);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (0, 3), ==, 1);
  g_assert_cmpuint (dc_infer_ring_shared_host_threads (16, 0), ==, 16);
}

int
main (int argc, char **argv)
{
  static const Case greedy = { "0", PROMPT, NULL }, sampled = { "80", PROMPT, NULL },
                    long_prompt = { "0", LONG_PROMPT, NULL },
                    draft = { "0", PROMPT, "--draft-span=8" };

  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/infer/ring/shared-host-threads", test_shared_host_threads);
  g_test_add_data_func ("/infer/ring/three-devices/greedy", &greedy, check_three);
  g_test_add_data_func ("/infer/ring/three-devices/sampled", &sampled, check_three);
  g_test_add_data_func ("/infer/ring/three-devices/long-prompt", &long_prompt, check_three);
  g_test_add_data_func ("/infer/ring/three-devices/draft-span", &draft, check_three);
  g_test_add_data_func ("/infer/ring/stage-lost/replayed", GINT_TO_POINTER (FALSE),
                        check_stage_lost);
  g_test_add_data_func ("/infer/ring/stage-lost/twice", GINT_TO_POINTER (TRUE),
                        check_stage_lost);
  g_test_add_data_func ("/infer/ring/head-cache/served", GINT_TO_POINTER (HEAD_SERVES),
                        check_head_cache);
  g_test_add_data_func ("/infer/ring/head-cache/lying-head", GINT_TO_POINTER (HEAD_LIES),
                        check_head_cache);
  g_test_add_data_func ("/infer/ring/head-cache/lying-head-files",
                        GINT_TO_POINTER (HEAD_LIES_FILES), check_head_cache);
  g_test_add_data_func ("/infer/ring/head-cache/no-stage-hub", GINT_TO_POINTER (NO_STAGE_HUB),
                        check_head_cache);
  g_test_add_func ("/infer/ring/stage-range-refused", test_stage_range_refused);
  g_test_add_func ("/infer/ring/probe-mismatch", test_probe_mismatch);
  g_test_add_func ("/infer/ring/bench-shape", test_bench_shape);
  g_test_add_func ("/infer/ring/bench-head-threads", test_bench_head_threads);
  g_test_add_func ("/infer/ring/bench-pin-cores", test_bench_pin_cores);
  g_test_add_func ("/infer/ring/bench-netns", test_bench_netns);
  g_test_add_data_func ("/infer/ring/refused/non-finite", "nan", check_refused);
  g_test_add_data_func ("/infer/ring/refused/other-model", "model", check_refused);
  return g_test_run ();
}
