/* test-cli-train.c: `daisychain-cli train`, `generate` and `export` end to end.
 *
 * Proves: train prints one JSON line per step with step, loss, tokens_per_s
 * and hash; training 100 steps equals training 50, saving, resuming and
 * training 50 (same hash at every step); generate's JSON has ids and text and
 * is reproducible for a seed; the exported Hugging Face folder, run by an
 * independent GPT-2 written in PyTorch (tests/check-hf-export.py, when
 * python3-torch is installed), gives our f32 logits within 1e-4 of the logit
 * scale and our INT8 logits within 5%; bad settings and hostile checkpoints
 * fail with exit status 1 and a message; `bench train --json` prints one
 * line per size with the documented fields; --simulate-peers 1 gives the
 * solo hashes at every step, --simulate-peers 3 the same hashes with 1 and
 * 3 threads, and every step line carries the roster.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "model/dc-gpt-vk-forward.h"

#define TIMEOUT_MS 120000

typedef struct
{
  char *dir;
  char *corpus;
} Fixture;

static void
fixture_set_up (Fixture       *f,
                gconstpointer  data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("dc-cli-train-XXXXXX", &error);
  g_assert_no_error (error);
  f->corpus = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
}

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);

      if (g_file_test (child, G_FILE_TEST_IS_DIR))
        remove_tree (child);
      else
        g_unlink (child);
    }
  g_rmdir (path);
}

static void
fixture_tear_down (Fixture       *f,
                   gconstpointer  data)
{
  remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->corpus);
}

static int
run_cli (const char * const  *args,
         char               **out,
         char               **err)
{
  return dc_test_run_cli (args, out, err, TIMEOUT_MS);
}

/* Parses every line; returns the objects in order. */
static GPtrArray *
json_lines (const char *text)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  GPtrArray *objects = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;

      if (lines[i][0] == '\0')
        continue;
      json_parser_load_from_data (parser, lines[i], -1, &error);
      g_assert_no_error (error);
      g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
      g_ptr_array_add (objects, json_object_ref (json_node_get_object (json_parser_get_root (parser))));
    }
  return objects;
}

static void
test_train_resume (Fixture       *f,
                   gconstpointer  data)
{
  g_autofree char *ckpt = g_build_filename (f->dir, "half.pt", NULL);
  g_autofree char *out = NULL, *err = NULL, *out_a = NULL, *out_b = NULL;
  g_autoptr(GPtrArray) straight = NULL, first = NULL, second = NULL;
  const char *common[] = { "--width", "16", "--seq", "16", "--batch", "2", "--seed", "5" };
  const char *args_straight[] = { "train", "--json", "--data", f->corpus, "--steps", "100",
                                  common[0], common[1], common[2], common[3], common[4],
                                  common[5], common[6], common[7], NULL };
  const char *args_first[] = { "train", "--json", "--data", f->corpus, "--steps", "100",
                               "--stop-at", "50", "--out", ckpt,
                               common[0], common[1], common[2], common[3], common[4],
                               common[5], common[6], common[7], NULL };
  const char *args_second[] = { "train", "--json", "--data", f->corpus, "--resume", ckpt, NULL };

  g_assert_cmpint (run_cli (args_straight, &out, &err), ==, 0);
  straight = json_lines (out);
  g_assert_cmpuint (straight->len, ==, 101);
  for (guint i = 0; i < 100; i++)
    {
      JsonObject *o = straight->pdata[i];

      g_assert_cmpstr (json_object_get_string_member (o, "event"), ==, "step");
      g_assert_cmpint (json_object_get_int_member (o, "step"), ==, i + 1);
      g_assert_true (json_object_get_double_member (o, "loss") > 0);
      g_assert_true (json_object_get_double_member (o, "tokens_per_s") > 0);
      g_assert_cmpuint (strlen (json_object_get_string_member (o, "hash")), ==, 16);
    }
  g_assert_cmpstr (json_object_get_string_member (straight->pdata[100], "event"), ==, "done");

  g_assert_cmpint (run_cli (args_first, &out_a, &err), ==, 0);
  g_assert_true (g_file_test (ckpt, G_FILE_TEST_EXISTS));
  g_assert_cmpint (run_cli (args_second, &out_b, &err), ==, 0);
  first = json_lines (out_a);
  second = json_lines (out_b);
  g_assert_cmpuint (first->len, ==, 51);
  g_assert_cmpuint (second->len, ==, 51);
  for (guint i = 0; i < 50; i++)
    {
      g_assert_cmpstr (json_object_get_string_member (first->pdata[i], "hash"), ==,
                       json_object_get_string_member (straight->pdata[i], "hash"));
      g_assert_cmpint (json_object_get_int_member (second->pdata[i], "step"), ==, 51 + i);
      g_assert_cmpstr (json_object_get_string_member (second->pdata[i], "hash"), ==,
                       json_object_get_string_member (straight->pdata[50 + i], "hash"));
    }
}

static char *
train_small (Fixture *f)
{
  char *ckpt = g_build_filename (f->dir, "model.pt", NULL);
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "train", "--data", f->corpus, "--steps", "100", "--width", "32",
                         "--seq", "16", "--batch", "4", "--out", ckpt, NULL };

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  return ckpt;
}

static void
test_generate (Fixture       *f,
               gconstpointer  data)
{
  g_autofree char *ckpt = train_small (f);
  g_autofree char *out1 = NULL, *out2 = NULL, *out3 = NULL, *err = NULL;
  const char *sample[] = { "generate", "--json", "--checkpoint", ckpt, "--prompt", "The ",
                           "--tokens", "24", "--temperature", "0.9", "--seed", "4", NULL };
  const char *greedy[] = { "generate", "--json", "--checkpoint", ckpt, "--prompt", "The ",
                           "--tokens", "24", NULL };
  g_autoptr(GPtrArray) a = NULL, b = NULL, c = NULL;
  JsonArray *ids;

  g_assert_cmpint (run_cli (sample, &out1, &err), ==, 0);
  g_assert_cmpint (run_cli (sample, &out2, &err), ==, 0);
  g_assert_cmpint (run_cli (greedy, &out3, &err), ==, 0);
  a = json_lines (out1);
  b = json_lines (out2);
  c = json_lines (out3);
  g_assert_cmpuint (a->len, ==, 1);
  ids = json_object_get_array_member (a->pdata[0], "ids");
  g_assert_cmpuint (json_array_get_length (ids), ==, 24);
  for (guint i = 0; i < 24; i++)
    g_assert_cmpint (json_array_get_int_element (ids, i), <, 256);
  g_assert_nonnull (json_object_get_string_member (a->pdata[0], "text"));
  /* Same seed, same text; the sampled text is not the greedy one. */
  g_assert_cmpstr (out1, ==, out2);
  g_assert_cmpstr (out1, !=, out3);
  g_test_message ("sampled: %s", json_object_get_string_member (a->pdata[0], "text"));
}

static char *
find_python_with_torch (void)
{
  const char *candidates[] = { g_getenv ("DC_PYTHON_TORCH"), "/usr/bin/python3", "python3" };

  for (guint i = 0; i < G_N_ELEMENTS (candidates); i++)
    {
      g_autofree char *path = candidates[i] != NULL ? g_find_program_in_path (candidates[i]) : NULL;
      const char *argv[] = { path, "-c", "import torch", NULL };
      int status = -1;

      if (path != NULL && dc_test_spawn (argv, NULL, NULL, &status, TIMEOUT_MS) && status == 0)
        return g_steal_pointer (&path);
    }
  return NULL;
}

static void
test_export (Fixture       *f,
             gconstpointer  data)
{
  g_autofree char *ckpt = train_small (f);
  g_autofree char *hf = g_build_filename (f->dir, "hf", NULL);
  g_autofree char *l32 = g_build_filename (f->dir, "f32.bin", NULL);
  g_autofree char *l8 = g_build_filename (f->dir, "int8.bin", NULL);
  g_autofree char *out = NULL, *err = NULL, *python = NULL, *script = NULL;
  const char *prompt = "This License";
  const char *export_args[] = { "export", "--json", "--checkpoint", ckpt, "--hf", hf, NULL };
  const char *dump32[] = { "generate", "--checkpoint", ckpt, "--prompt", prompt, "--tokens", "0",
                           "--dump-logits", l32, "--precision", "f32", NULL };
  const char *dump8[] = { "generate", "--checkpoint", ckpt, "--prompt", prompt, "--tokens", "0",
                          "--dump-logits", l8, NULL };
  const char *files[] = { "config.json", "model.safetensors", "tokenizer.json",
                          "tokenizer_config.json", "generation_config.json" };
  g_autoptr(GPtrArray) lines = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *r;
  double scale;
  int status = -1;

  g_assert_cmpint (run_cli (export_args, &out, &err), ==, 0);
  lines = json_lines (out);
  g_assert_cmpstr (json_object_get_string_member (lines->pdata[0], "event"), ==, "exported");
  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = g_build_filename (hf, files[i], NULL);

      g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
    }
  g_assert_cmpint (run_cli (dump32, NULL, NULL), ==, 0);
  g_assert_cmpint (run_cli (dump8, NULL, NULL), ==, 0);

  python = find_python_with_torch ();
  if (python == NULL)
    {
      g_test_skip ("python3 with torch (Debian's python3-torch) is not installed");
      return;
    }
  script = dc_test_dup_source_path ("tests", "check-hf-export.py", NULL);
  {
    const char *argv[] = { python, script, hf, prompt, l32, l8, NULL };

    g_clear_pointer (&out, g_free);
    g_clear_pointer (&err, g_free);
    g_assert_true (dc_test_spawn (argv, &out, &err, &status, TIMEOUT_MS));
  }
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  json_parser_load_from_data (parser, out, -1, &error);
  g_assert_no_error (error);
  r = json_node_get_object (json_parser_get_root (parser));
  g_test_message ("PyTorch GPT-2 on the export: %s", out);
  g_assert_true (json_object_get_boolean_member (r, "config_ok"));
  g_assert_true (json_object_get_boolean_member (r, "tokenizer_ok"));
  scale = json_object_get_double_member (r, "logit_scale");
  g_assert_cmpfloat (json_object_get_double_member (r, "max_diff_f32"), <=, 1e-4 * scale);
  g_assert_cmpfloat (json_object_get_double_member (r, "max_diff_int8"), <=, 0.05 * scale);
  g_assert_cmpfloat (json_object_get_double_member (r, "argmax_agree_int8"), >=, 0.9);
}

static void
test_failures (Fixture       *f,
               gconstpointer  data)
{
  g_autofree char *evil = dc_test_dup_source_path ("tests", "data", "pt-malicious-global-nomemo.pt",
                                                   NULL);
  g_autofree char *out = NULL, *err = NULL, *err2 = NULL, *err3 = NULL;
  const char *wide[] = { "train", "--data", f->corpus, "--width", "200", NULL };
  const char *hostile[] = { "generate", "--json", "--checkpoint", evil, "--prompt", "x", NULL };
  const char *no_file[] = { "train", "--data", "/nonexistent/text", NULL };
  g_autoptr(GPtrArray) lines = NULL;

  g_assert_cmpint (run_cli (wide, NULL, &err), ==, 1);
  g_assert_nonnull (strstr (err, "width 200"));
  g_assert_cmpint (run_cli (hostile, &out, &err2), ==, 1);
  g_assert_nonnull (strstr (err2, "is not allowed"));
  lines = json_lines (out);
  g_assert_cmpstr (json_object_get_string_member (lines->pdata[0], "event"), ==, "error");
  g_assert_cmpint (run_cli (no_file, NULL, &err3), ==, 1);
  g_assert_nonnull (strstr (err3, "is neither a file nor a Hugging Face dataset id"));
}


/* Runs `train --json` for 5 steps of a small model and returns the step lines. */
static GPtrArray *
train_steps (Fixture    *f,
             const char *peers,
             const char *threads)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "train", "--json", "--data", f->corpus, "--width", "16", "--seq", "16",
                         "--batch", "2", "--seed", "4", "--steps", "100", "--stop-at", "5",
                         "--threads", threads,
                         peers != NULL ? "--simulate-peers" : NULL, peers, NULL };
  GPtrArray *lines;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  lines = json_lines (out);
  g_assert_cmpuint (lines->len, ==, 6);
  for (guint i = 0; i < 5; i++)
    {
      JsonObject *o = lines->pdata[i];

      g_assert_cmpstr (json_object_get_string_member (o, "event"), ==, "step");
      g_assert_cmpint (json_object_get_int_member (o, "step"), ==, i + 1);
      g_assert_cmpint (json_object_get_int_member (o, "roster"), ==,
                       peers != NULL ? g_ascii_strtoll (peers, NULL, 10) : 1);
    }
  return lines;
}

static void
assert_same_step_hashes (GPtrArray *a,
                         GPtrArray *b)
{
  for (guint i = 0; i < 5; i++)
    g_assert_cmpstr (json_object_get_string_member (a->pdata[i], "hash"), ==,
                     json_object_get_string_member (b->pdata[i], "hash"));
}

/* --simulate-peers 1 is the solo run at every step; --simulate-peers 3 is
 * the same with 1 and 3 threads, twice; the roster says how many devices
 * took each step; a group beyond the cap is a usage error. */
static void
test_simulate_peers (Fixture       *f,
                     gconstpointer  data)
{
  g_autoptr(GPtrArray) solo = train_steps (f, NULL, "2");
  g_autoptr(GPtrArray) one = train_steps (f, "1", "2");
  g_autoptr(GPtrArray) three_1 = train_steps (f, "3", "1");
  g_autoptr(GPtrArray) three_3 = train_steps (f, "3", "3");
  g_autoptr(GPtrArray) three_again = train_steps (f, "3", "3");
  g_autofree char *err = NULL;
  const char *too_many[] = { "train", "--data", f->corpus, "--simulate-peers", "17", NULL };

  assert_same_step_hashes (solo, one);
  assert_same_step_hashes (three_1, three_3);
  assert_same_step_hashes (three_3, three_again);
  g_assert_cmpstr (json_object_get_string_member (solo->pdata[0], "hash"), !=,
                   json_object_get_string_member (three_1->pdata[0], "hash"));
  g_assert_cmpint (run_cli (too_many, NULL, &err), ==, 2);
  g_assert_nonnull (strstr (err, "--simulate-peers"));
}

static void
test_bench (Fixture       *f,
            gconstpointer  data)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "bench", "train", "--json", "--no-torch", "--no-vulkan",
                         "--min-time", "0.01", NULL };
  g_autoptr(GPtrArray) lines = NULL;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  lines = json_lines (out);
  g_assert_cmpuint (lines->len, ==, 2);
  for (guint i = 0; i < lines->len; i++)
    {
      JsonObject *o = lines->pdata[i];

      g_assert_cmpint (json_object_get_int_member (o, "width"), ==, i == 0 ? 32 : 128);
      g_assert_cmpstr (json_object_get_string_member (o, "backend"), ==, "cpu");
      g_assert_true (json_object_get_double_member (o, "tokens_per_s") > 0);
      g_assert_true (json_object_get_null_member (o, "torch_cpu_tokens_per_s"));
      g_assert_cmpint (json_object_get_int_member (o, "steps"), >=, 2);
      /* Where the step's time went (issue 14): three shares that sum to 1,
       * and the products take some of it. */
      {
        double gemm = json_object_get_double_member (o, "gemm_share");
        double other = json_object_get_double_member (o, "other_share");
        double wait = json_object_get_double_member (o, "wait_share");

        g_assert_cmpfloat (gemm, >, 0.0);
        g_assert_cmpfloat (other, >=, 0.0);
        g_assert_cmpfloat (wait, >=, 0.0);
        g_assert_cmpfloat (gemm + other + wait, >, 0.99);
        g_assert_cmpfloat (gemm + other + wait, <, 1.01);
      }
      /* The same time by pass (issue 14's Xeon profile): every kind of
       * pass named, shares that sum to 1, and how wide each kind ran. */
      {
        static const char *const phases[] = { "gemm", "embed", "norm", "attention", "bias",
                                              "loss", "optimizer", "rest" };
        JsonObject *shares = json_object_get_object_member (o, "phase_shares");
        JsonObject *widths = json_object_get_object_member (o, "phase_threads");
        double sum = 0;

        g_assert_nonnull (shares);
        g_assert_nonnull (widths);
        for (guint p = 0; p < G_N_ELEMENTS (phases); p++)
          {
            double share = json_object_get_double_member (shares, phases[p]);

            g_assert_cmpfloat (share, >=, 0.0);
            sum += share;
          }
        g_assert_cmpfloat (json_object_get_double_member (shares, "attention"), >, 0.0);
        g_assert_cmpfloat (sum, >, 0.98);
        g_assert_cmpfloat (sum, <, 1.02);
        g_assert_cmpfloat (json_object_get_double_member (widths, "norm"), >=, 1.0);
      }
      g_assert_cmpint (json_object_get_int_member (o, "rounds"), ==, 1);
    }
}

/* --rounds alternates PyTorch and ours: one object per size still, with
 * the number of rounds and the range of tokens/s; bad counts are refused. */
static void
test_bench_rounds (Fixture       *f,
                   gconstpointer  data)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "bench", "train", "--json", "--no-torch", "--no-vulkan",
                         "--min-time", "0.01", "--rounds", "3", NULL };
  const char *bad[] = { "bench", "train", "--rounds", "21", NULL };
  g_autoptr(GPtrArray) lines = NULL;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  lines = json_lines (out);
  g_assert_cmpuint (lines->len, ==, 2);
  for (guint i = 0; i < lines->len; i++)
    {
      JsonObject *o = lines->pdata[i];
      double lo = json_object_get_double_member (o, "tokens_per_s_min");
      double hi = json_object_get_double_member (o, "tokens_per_s_max");
      double median = json_object_get_double_member (o, "tokens_per_s");

      g_assert_cmpint (json_object_get_int_member (o, "rounds"), ==, 3);
      g_assert_cmpfloat (lo, >, 0);
      g_assert_cmpfloat (lo, <=, median);
      g_assert_cmpfloat (median, <=, hi);
      g_assert_true (json_object_get_null_member (o, "ratio_vs_torch_cpu_min"));
    }
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (run_cli (bad, NULL, &err), ==, 2);
  g_assert_nonnull (strstr (err, "--rounds must be between 1 and 20"));
}

/* --dry-run prints the plan and its memory without training, never with a
 * group; the Advanced sizes only with --advanced (a group's are tested in
 * test-train-group-advanced). */
static void
test_dry_run_advanced (Fixture       *f,
                       gconstpointer  data)
{
  const char *gpt2[] = { "train", "--json", "--dry-run", "--advanced", "--data", f->corpus,
                         "--width", "768", "--layers", "12", "--heads", "12", "--seq", "1024",
                         "--batch", "2", NULL };
  const char *unasked[] = { "train", "--data", f->corpus, "--width", "768", "--seq", "32", NULL };
  const char *group[] = { "train", "--dry-run", "--room", "x", "--signal",
                          "ws://127.0.0.1:1/signal", NULL };
  const char *bad_heads[] = { "train", "--dry-run", "--advanced", "--data", f->corpus,
                              "--width", "768", "--heads", "7", NULL };
  g_autofree char *out = NULL, *err = NULL, *err2 = NULL, *err3 = NULL;
  g_autoptr(GPtrArray) lines = NULL;
  JsonObject *plan;
  gint64 total;

  g_assert_cmpint (run_cli (gpt2, &out, NULL), ==, 0);
  lines = json_lines (out);
  g_assert_cmpuint (lines->len, ==, 1);
  plan = lines->pdata[0];
  g_assert_cmpstr (json_object_get_string_member (plan, "event"), ==, "plan");
  g_assert_cmpint (json_object_get_int_member (plan, "width"), ==, 768);
  g_assert_cmpint (json_object_get_int_member (plan, "layers"), ==, 12);
  g_assert_cmpint (json_object_get_int_member (plan, "heads"), ==, 12);
  g_assert_cmpint (json_object_get_int_member (plan, "seq"), ==, 1024);
  g_assert_true (json_object_get_boolean_member (plan, "advanced"));
  /* 86 M parameters: weights, two moments and the gradient are 1.4 GB, and
   * the arena at sequence 1024 and batch 2 another 2.5 GB. */
  g_assert_cmpint (json_object_get_int_member (plan, "params"), ==, 86039040);
  total = json_object_get_int_member (plan, "memory_bytes");
  g_assert_cmpint (total, ==, json_object_get_int_member (plan, "params_bytes")
                              + json_object_get_int_member (plan, "grads_bytes")
                              + json_object_get_int_member (plan, "arena_bytes")
                              + json_object_get_int_member (plan, "scratch_bytes"));
  g_assert_cmpint (total, >, 3500000000);
  g_assert_true (json_object_has_member (plan, "available_bytes"));
  g_assert_true (json_object_has_member (plan, "fits"));
  /* Issue 15: the resident step's buffers are shown too (F 3.30 GB at batch
   * 2, Adam's m and v 0.7 GB: it shares F's weights and gradients). */
  {
    DcGptConfig config;
    guint64 device_bytes, host_bytes;

    dc_gpt_config_init_derived (&config, 768, 1024);
    config.n_layer = 12;
    config.n_head = 12;
    dc_gpt_vk_train_memory (&config, 2, &device_bytes, &host_bytes);
    g_assert_cmpint (json_object_get_int_member (plan, "resident_device_bytes"), ==,
                     (gint64) device_bytes);
    g_assert_cmpint (json_object_get_int_member (plan, "resident_host_bytes"), ==,
                     (gint64) host_bytes);
    g_assert_cmpint (device_bytes, >, 3299684356 + 8 * (gint64) 86039040);
    /* Batch 2 is the largest whose pass fits one 4 GiB storage binding (F
     * 3.30 GB; batch 3's is over 4.9 GB): above it only Adam is resident. */
    g_assert_cmpint (json_object_get_int_member (plan, "resident_max_batch"), ==, 2);
  }

  g_assert_cmpint (run_cli (unasked, NULL, &err), ==, 1);
  g_assert_nonnull (strstr (err, "Advanced range"));
  g_assert_cmpint (run_cli (group, NULL, &err2), !=, 0);
  g_assert_nonnull (strstr (err2, "not with --room"));
  g_assert_cmpint (run_cli (bad_heads, NULL, &err3), ==, 1);
  g_assert_nonnull (strstr (err3, "7 heads"));
}


int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/dc/cli/train/json-and-resume", Fixture, NULL, fixture_set_up, test_train_resume,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/generate", Fixture, NULL, fixture_set_up, test_generate,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/export-hf", Fixture, NULL, fixture_set_up, test_export,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/failures", Fixture, NULL, fixture_set_up, test_failures,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/simulate-peers", Fixture, NULL, fixture_set_up, test_simulate_peers,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/bench", Fixture, NULL, fixture_set_up, test_bench,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/bench-rounds", Fixture, NULL, fixture_set_up, test_bench_rounds,
              fixture_tear_down);
  g_test_add ("/dc/cli/train/dry-run-advanced", Fixture, NULL, fixture_set_up,
              test_dry_run_advanced, fixture_tear_down);
  return g_test_run ();
}
