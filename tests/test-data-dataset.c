/* test-data-dataset.c: dataset specs, row-group plans, the built-in corpus
 * and byte-level batches (no network: the HTTP side is in test-data-http).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "data/dc-corpus.h"
#include "data/dc-data-error.h"
#include "data/dc-dataset.h"
#include "dc-test-utils.h"

static void
test_builtin_corpus (void)
{
  g_autoptr(GBytes) corpus = dc_corpus_dup_builtin ();
  gsize len;
  const char *text = g_bytes_get_data (corpus, &len);

  /* Some hundreds of KB of English prose, valid UTF-8. */
  g_assert_cmpuint (len, >, 300 * 1024);
  g_assert_true (g_utf8_validate (text, (gssize) len, NULL));
  g_assert_true (g_str_has_prefix (text, "Chapter 1"));
  g_assert_nonnull (g_strstr_len (text, (gssize) len, "Anne Elliot"));
}

static void
test_spec_parse (void)
{
  g_autoptr(DcDatasetSpec) spec = dc_dataset_spec_parse (DC_DATASET_DEFAULT, NULL);
  g_autoptr(DcDatasetSpec) rev = dc_dataset_spec_parse ("org/set@refs/convert/parquet", NULL);
  g_autoptr(DcDatasetSpec) plain = dc_dataset_spec_parse ("org/set", NULL);
  const char *bad[] = { "", "noslash", "/x", "a/", "a/b/../c", "a b/c", "a/b@" };

  g_assert_cmpstr (spec->repo, ==, "HuggingFaceFW/fineweb-edu");
  g_assert_cmpstr (spec->folder, ==, "sample/10BT");
  g_assert_cmpstr (spec->revision, ==, "main");
  /* "@rev" ends at the next slash: this one is revision "refs" and folder "convert/parquet". */
  g_assert_cmpstr (rev->revision, ==, "refs");
  g_assert_cmpstr (rev->folder, ==, "convert/parquet");
  g_assert_cmpstr (plain->folder, ==, "");

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(DcDatasetSpec) none = dc_dataset_spec_parse (bad[i], &error);

      g_assert_null (none);
      g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_FAILED);
    }
}

static void
test_plan_disjoint (void)
{
  const guint n = 103;
  const guint world = 4;
  g_autofree guint *owner = g_new (guint, n);
  g_autoptr(GArray) plan = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) again = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) other = g_array_new (FALSE, FALSE, sizeof (guint));
  guint covered = 0;

  for (guint i = 0; i < n; i++)
    owner[i] = G_MAXUINT;
  for (guint rank = 0; rank < world; rank++)
    {
      dc_dataset_plan (42, 7, n, rank, world, plan);
      g_assert_cmpuint (plan->len, >=, n / world);
      for (guint k = 0; k < plan->len; k++)
        {
          guint item = g_array_index (plan, guint, k);

          g_assert_cmpuint (item, <, n);
          /* No item goes to two devices. */
          g_assert_cmpuint (owner[item], ==, G_MAXUINT);
          owner[item] = rank;
          covered++;
        }
    }
  /* Together they read everything. */
  g_assert_cmpuint (covered, ==, n);

  /* The same seed gives the same plan on every device; another seed or
   * another file gives another. */
  dc_dataset_plan (42, 7, n, 1, world, plan);
  dc_dataset_plan (42, 7, n, 1, world, again);
  g_assert_cmpmem (plan->data, plan->len * sizeof (guint), again->data, again->len * sizeof (guint));
  dc_dataset_plan (43, 7, n, 1, world, other);
  g_assert_true (memcmp (plan->data, other->data, plan->len * sizeof (guint)) != 0);
  dc_dataset_plan (42, 8, n, 1, world, other);
  g_assert_true (memcmp (plan->data, other->data, plan->len * sizeof (guint)) != 0);

  /* Not the identity: the order is shuffled. */
  dc_dataset_plan (42, 7, n, 0, 1, plan);
  {
    guint fixed = 0;

    for (guint i = 0; i < n; i++)
      fixed += g_array_index (plan, guint, i) == i;
    g_assert_cmpuint (fixed, <, n / 4);
  }
}

static void
test_builtin_stream_batches (void)
{
  g_autoptr(DcTextStream) solo = dc_text_stream_new_builtin (0, 1);
  g_autoptr(DcTextStream) rank1 = dc_text_stream_new_builtin (1, 2);
  g_autoptr(GBytes) corpus = dc_corpus_dup_builtin ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) first = NULL;
  g_autoptr(GBytes) second = NULL;
  g_autoptr(GBytes) other = NULL;
  guint8 tokens[3 * 17];

  g_assert_true (dc_text_stream_is_builtin (solo));
  first = dc_text_stream_next (solo, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (first, NULL), g_bytes_get_size (first), "Chapter 1", 9);
  second = dc_text_stream_next (solo, NULL, &error);
  g_assert_no_error (error);
  /* Rank 1 of 2 starts with the second paragraph. */
  other = dc_text_stream_next (rank1, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (other, second));

  /* Batches: 3 rows of T + 1 = 17 bytes, consecutive windows of the text
   * joined by blank lines. */
  g_clear_pointer (&solo, dc_text_stream_free);
  solo = dc_text_stream_new_builtin (0, 1);
  g_assert_true (dc_text_stream_fill_batch (solo, 3, 16, tokens, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (tokens, 11, "Chapter 1\n\n", 11);
  g_assert_cmpmem (tokens + 11, 17 * 3 - 11, (const char *) g_bytes_get_data (second, NULL),
                   17 * 3 - 11);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/data/dataset/builtin-corpus", test_builtin_corpus);
  g_test_add_func ("/dc/data/dataset/spec-parse", test_spec_parse);
  g_test_add_func ("/dc/data/dataset/plan-disjoint", test_plan_disjoint);
  g_test_add_func ("/dc/data/dataset/builtin-batches", test_builtin_stream_batches);

  return g_test_run ();
}
