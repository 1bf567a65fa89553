/* test-data-dataset.c: dataset specs, row-group plans, the built-in corpus
 * and byte-level batches (no network: the HTTP side is in test-data-http).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <sys/resource.h>

#include "data/dc-corpus.h"
#include "data/dc-data-error.h"
#include "data/dc-dataset.h"
#include "data/dc-dataset-private.h"
#include "train/dc-train-data.h"
#include "dc-test-parquet.h"
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

/* Caps this process's address space at what it maps now plus @extra bytes,
 * so that materialising a huge row group fails fast (g_malloc aborts the
 * subprocess) instead of eating the machine. */
static void
limit_address_space (gsize extra)
{
  g_autofree char *status = NULL;
  const char *line;
  struct rlimit limit;
  guint64 vm_kb;

  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  line = strstr (status, "VmSize:");
  g_assert_nonnull (line);
  vm_kb = g_ascii_strtoull (line + strlen ("VmSize:"), NULL, 10);
  limit.rlim_cur = limit.rlim_max = vm_kb * 1024 + extra;
  g_assert_cmpint (setrlimit (RLIMIT_AS, &limit), ==, 0);
}

/* A row group of 12.8 million rows of a 1 KiB text (13 GB if every row were
 * copied, 2.6 KB of file): gathering the trainer's 8 MiB must hold no more
 * than one slice of the row group at a time. */
static void
test_stream_bounded (void)
{
  if (g_test_subprocess ())
    {
      g_autofree char *value = g_strnfill (1024, 'q');
      g_autoptr(GBytes) bytes = dc_test_parquet_repeated (value, 64, 200000, 12800000,
                                                          12800000);
      g_autoptr(DcByteSource) source = dc_byte_source_new_for_bytes (bytes, "many.parquet");
      g_autoptr(DcTextStream) stream = _dc_text_stream_new_for_source (source, "text", 0, 1, 1);
      gsize gathered = 0;
      gsize peak = 0;

      limit_address_space (512u << 20);
      while (gathered < DC_TRAIN_DATA_DATASET_BYTES)
        {
          g_autoptr(GError) error = NULL;
          g_autoptr(GBytes) text = dc_text_stream_next (stream, NULL, &error);

          g_assert_no_error (error);
          g_assert_false (dc_text_stream_is_builtin (stream));
          g_assert_cmpmem (g_bytes_get_data (text, NULL), g_bytes_get_size (text), value, 1024);
          gathered += g_bytes_get_size (text);
          peak = MAX (peak, _dc_text_stream_get_buffered_bytes (stream));
        }
      g_test_message ("peak text held by the stream: %" G_GSIZE_FORMAT " bytes", peak);
      /* One slice, past its budget by at most one text. */
      g_assert_cmpuint (peak, <=, DC_TEXT_STREAM_SLICE_BYTES + 1024);
      return;
    }
  g_test_trap_subprocess (NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

/* Slices follow each other: every row of a 4,000-row file (about 4 MB in
 * four PLAIN pages, so slices end mid-page) comes out once, in order. */
static void
test_stream_slices_in_order (void)
{
  g_autoptr(GByteArray) chunk = g_byte_array_new ();
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(DcByteSource) source = NULL;
  g_autoptr(DcTextStream) stream = NULL;
  g_autofree char *pad = g_strnfill (990, '.');
  guint next = 0;

  for (guint page = 0; page < 4; page++)
    {
      g_autoptr(GPtrArray) values = g_ptr_array_new_with_free_func (g_free);

      for (guint i = 0; i < 1000; i++)
        g_ptr_array_add (values, g_strdup_printf ("row %06u %s", page * 1000 + i, pad));
      dc_test_parquet_plain_page (chunk, (const char * const *) values->pdata, values->len);
    }
  bytes = dc_test_parquet_file (chunk, 4000, 4000);
  source = dc_byte_source_new_for_bytes (bytes, "rows.parquet");
  stream = _dc_text_stream_new_for_source (source, "text", 0, 1, 1);
  for (;;)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GBytes) text = dc_text_stream_next (stream, NULL, &error);
      g_autofree char *expect = NULL;

      g_assert_no_error (error);
      g_assert_false (dc_text_stream_is_builtin (stream));
      if (dc_text_stream_get_epoch (stream) > 0)
        break;
      expect = g_strdup_printf ("row %06u %s", next++, pad);
      g_assert_cmpmem (g_bytes_get_data (text, NULL), g_bytes_get_size (text), expect,
                       strlen (expect));
      g_assert_cmpuint (_dc_text_stream_get_buffered_bytes (stream), <=,
                        DC_TEXT_STREAM_SLICE_BYTES + strlen (expect));
    }
  g_assert_cmpuint (next, ==, 4000);
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
  g_test_add_func ("/dc/data/dataset/stream-bounded", test_stream_bounded);
  g_test_add_func ("/dc/data/dataset/stream-slices-in-order", test_stream_slices_in_order);

  return g_test_run ();
}
