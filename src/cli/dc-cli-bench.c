/* dc-cli-bench.c: `daisychain-cli bench gemm`, INT8 GEMM throughput per path
 * next to PyTorch's f32 matmul (and torch._int_mm where CUDA is present),
 * measured in the same invocation by scripts/bench-torch.py, which travels
 * inside the program as a resource. Nothing is installed: without PyTorch the
 * torch columns are null and the output says why.
 *
 * --rounds N repeats the whole comparison (PyTorch, then every path) N times
 * and reports medians; the ratio is the median of each round's ratio, so that
 * a machine that slows down between rounds moves both sides of a ratio
 * together rather than one of them.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>
#include <time.h>

#include "dc-cli.h"
#include "dc-cli-resources.h"
#include "engine/dc-gemm-backend.h"
#include "engine/dc-gemm-peak.h"
#include "engine/dc-parallel.h"

typedef struct
{
  const char *name;
  gsize       m;
  gsize       n;
  gsize       k;
} Shape;

/* Products the models of later issues run (Y = X·Wᵀ: M tokens, N outputs,
 * K inputs): the GPT-2 training model at its largest seed size (width 128,
 * 32 sequences of 128 tokens) and the MLPs of two Llama-family inference
 * models on a 128-token prompt; then SmolLM-135M decoding (width 576, 9
 * query and 3 key/value heads of 64, MLP 1536, vocabulary 49,152): one
 * token's products, eight sequences' MLP, and a 64-token prefill. */
static const Shape model_shapes[] = {
  { "gpt2-w128-mlp-up", 4096, 512, 128 },
  { "gpt2-w128-mlp-down", 4096, 128, 512 },
  { "smollm-135m-mlp-up", 128, 1536, 576 },
  { "tinyllama-1.1b-mlp-up", 128, 5632, 2048 },
  { "smollm-135m-decode-q", 1, 576, 576 },
  { "smollm-135m-decode-kv", 1, 192, 576 },
  { "smollm-135m-decode-mlp-up", 1, 1536, 576 },
  { "smollm-135m-decode-mlp-down", 1, 576, 1536 },
  { "smollm-135m-decode-lm-head", 1, 49152, 576 },
  { "smollm-135m-decode8-mlp-up", 8, 1536, 576 },
  { "smollm-135m-prefill64-mlp-up", 64, 1536, 576 },
  { "smollm-135m-prefill64-mlp-down", 64, 576, 1536 },
};

typedef struct
{
  double gflops;     /* torch f32 matmul on the CPU, or < 0 */
  double int8_gops;  /* torch._int_mm on CUDA, or < 0 */
} TorchRow;

/* One (shape, path) pair's measurements over the rounds. */
typedef struct
{
  GArray *gops;       /* double per round */
  GArray *cpu_gops;   /* per second of the process's CPU time, per round */
  GArray *torch;      /* torch f32 GFLOP/s per round, when measured */
  GArray *ratio;      /* gops / torch of the same round */
  GArray *int8;       /* torch._int_mm GOPS per round, when measured */
  /* Vulkan, per round (dc_gemm_backend_time_queued ()): GOPS with the
   * dispatches queued in one submission, GOPS by GPU timestamps, and one
   * dispatch per submission in ms, waited for by fence wait and by poll. */
  GArray *queued_gops;
  GArray *gpu_gops;
  GArray *fence_wait_ms;
  GArray *fence_poll_ms;
  GArray *fresh_ms;   /* the same with a command buffer and fence made per dispatch */
} Result;

static void
result_clear (Result *result)
{
  g_clear_pointer (&result->gops, g_array_unref);
  g_clear_pointer (&result->cpu_gops, g_array_unref);
  g_clear_pointer (&result->torch, g_array_unref);
  g_clear_pointer (&result->ratio, g_array_unref);
  g_clear_pointer (&result->int8, g_array_unref);
  g_clear_pointer (&result->queued_gops, g_array_unref);
  g_clear_pointer (&result->gpu_gops, g_array_unref);
  g_clear_pointer (&result->fence_wait_ms, g_array_unref);
  g_clear_pointer (&result->fence_poll_ms, g_array_unref);
  g_clear_pointer (&result->fresh_ms, g_array_unref);
}

/* Seconds each thread runs the peak loop: the clock settles within
 * milliseconds; a quarter second per thread averages out timer reads and a
 * preemption or two, and adds under a second to a benchmark. */
#define PEAK_SECONDS 0.25

/* Sustained int8 multiply-accumulates per cycle and core that each kernel's
 * instruction mix allows: AVX2 issues a 32-wide vpmaddubsw plus its vpmaddwd
 * widening on two 256-bit multiply ports; VNNI two 64-wide vpdpbusd; NEON
 * two 8-wide smull; the scalar loop one. The ratio to this peak is an estimate, stated as such. */
static double
macs_per_cycle (const char *kernel)
{
  if (g_str_equal (kernel, "avx2"))
    return 32;
  if (g_str_equal (kernel, "avx512-vnni"))
    return 128;
  if (g_str_equal (kernel, "neon"))
    return 16;
  if (g_str_equal (kernel, "scalar"))
    return 1;
  return -1;
}

static double
cpu_mhz (void)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/cpuinfo", &text, NULL, NULL))
    return -1;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], "cpu MHz"))
      {
        const char *colon = strchr (lines[i], ':');

        if (colon != NULL)
          return g_ascii_strtod (colon + 1, NULL);
      }
  return -1;
}

static char *
shape_key (gsize m,
           gsize n,
           gsize k)
{
  return g_strdup_printf ("%" G_GSIZE_FORMAT ",%" G_GSIZE_FORMAT ",%" G_GSIZE_FORMAT, m, n, k);
}

/* Runs the torch script with one interpreter; FALSE when it has no torch. */
static gboolean
run_torch_with (const char  *python,
                const char  *script,
                guint        n_threads,
                double       min_time,
                GArray      *shapes,
                GHashTable  *rows,
                char       **version)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL;
  g_auto(GStrv) lines = NULL;
  char min_time_text[G_ASCII_DTOSTR_BUF_SIZE];
  int status = 0;

  g_ptr_array_add (argv, g_strdup (python));
  g_ptr_array_add (argv, g_strdup ("-c"));
  g_ptr_array_add (argv, g_strdup (script));
  g_ptr_array_add (argv, g_strdup_printf ("%u", n_threads));
  g_ptr_array_add (argv, g_strdup (g_ascii_dtostr (min_time_text, sizeof min_time_text, min_time)));
  for (guint i = 0; i < shapes->len; i++)
    {
      const Shape *s = &g_array_index (shapes, Shape, i);

      g_ptr_array_add (argv, shape_key (s->m, s->n, s->k));
    }
  g_ptr_array_add (argv, NULL);

  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                     NULL, NULL, &out, NULL, &status, NULL) ||
      !g_spawn_check_wait_status (status, NULL))
    return FALSE;

  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *object;

      if (*lines[i] == '\0' || !json_parser_load_from_data (parser, lines[i], -1, NULL) ||
          !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue;
      object = json_node_get_object (json_parser_get_root (parser));
      if (json_object_has_member (object, "torch"))
        {
          const char *cuda = json_object_get_string_member_with_default (object, "cuda", NULL);

          g_free (*version);
          *version = g_strdup_printf ("torch %s, %" G_GINT64_FORMAT " threads%s%s",
                                      json_object_get_string_member_with_default (object, "torch",
                                                                                  "?"),
                                      json_object_get_int_member_with_default (object, "threads",
                                                                               0),
                                      cuda ? ", CUDA " : "", cuda ? cuda : "");
        }
      else if (json_object_has_member (object, "gflops"))
        {
          TorchRow *row = g_new (TorchRow, 1);

          row->gflops = json_object_get_double_member_with_default (object, "gflops", -1);
          row->int8_gops = json_object_get_double_member_with_default (object, "int8_gops", -1);
          g_hash_table_insert (rows,
                               shape_key (json_object_get_int_member_with_default (object, "m", 0),
                                          json_object_get_int_member_with_default (object, "n", 0),
                                          json_object_get_int_member_with_default (object, "k", 0)),
                               row);
        }
    }
  return *version != NULL;
}

static gboolean
run_torch (guint        n_threads,
           double       min_time,
           GArray      *shapes,
           GHashTable  *rows,
           char       **version)
{
  g_autoptr(GBytes) script = NULL;
  g_autofree char *text = NULL;
  const char *python = g_getenv ("DC_BENCH_PYTHON");

  script = g_resource_lookup_data (dc_cli_get_resource (), RESOURCE_BASE "/cli/bench-torch.py",
                                   G_RESOURCE_LOOKUP_FLAGS_NONE, NULL);
  if (script == NULL)
    return FALSE;
  text = g_strndup (g_bytes_get_data (script, NULL), g_bytes_get_size (script));

  /* Debian's interpreter first (python3-torch lives there), then the one on
   * PATH (the GPU machine's image keeps torch in its own python3). */
  if (python != NULL)
    return run_torch_with (python, text, n_threads, min_time, shapes, rows, version);
  return run_torch_with ("/usr/bin/python3", text, n_threads, min_time, shapes, rows, version) ||
         run_torch_with ("python3", text, n_threads, min_time, shapes, rows, version);
}

static DcQuantMatrix *
random_matrix (GRand *rand,
               gsize  n,
               gsize  k)
{
  DcQuantMatrix *m = dc_quant_matrix_new (n, k, NULL);

  for (gsize i = 0; i < n * k; i++)
    m->q[i] = (gint8) g_rand_int_range (rand, -127, 128);
  for (gsize v = 0; v < n; v++)
    m->exponent[v] = g_rand_int_range (rand, -10, 11);
  return m;
}

static void
json_add_double_or_null (JsonBuilder *builder,
                         const char  *name,
                         double       value)
{
  json_builder_set_member_name (builder, name);
  if (value >= 0)
    json_builder_add_double_value (builder, value);
  else
    json_builder_add_null_value (builder);
}

int
dc_cli_bench_run (const DcCliCommand  *command,
                  DcCliOptions        *options,
                  int                  argc,
                  char               **argv)
{
  g_autofree char *paths_text = NULL;
  g_autofree char *sizes_text = NULL;
  g_autofree char *kernels_text = NULL;
  gboolean no_model = FALSE, no_torch = FALSE;
  int n_threads = 0;
  int rounds = 1;
  double min_time = 0.3;
  const GOptionEntry entries[] = {
    { "paths", 0, 0, G_OPTION_ARG_STRING, &paths_text,
      N_("Comma-separated paths (default: cpu-scalar,cpu,vulkan)"), N_("PATHS") },
    { "sizes", 0, 0, G_OPTION_ARG_STRING, &sizes_text,
      N_("Comma-separated M=N=K sizes (default: 128,512,1024,2048)"), N_("SIZES") },
    { "kernels", 0, 0, G_OPTION_ARG_STRING, &kernels_text,
      N_("Comma-separated Vulkan kernels, each measured as its own path (a sweep)"),
      N_("KERNELS") },
    { "no-model-shapes", 0, 0, G_OPTION_ARG_NONE, &no_model, N_("Skip the model shapes"), NULL },
    { "no-torch", 0, 0, G_OPTION_ARG_NONE, &no_torch, N_("Skip the PyTorch reference"), NULL },
    { "threads", 't', 0, G_OPTION_ARG_INT, &n_threads,
      N_("CPU threads (default: all processors)"), N_("N") },
    { "min-time", 0, 0, G_OPTION_ARG_DOUBLE, &min_time,
      N_("Seconds to time each product for (default: 0.3)"), N_("SECONDS") },
    { "rounds", 0, 0, G_OPTION_ARG_INT, &rounds,
      N_("Repeat the comparison and report medians (default: 1)"), N_("N") },
    { NULL }
  };
  g_autoptr(GArray) shapes = g_array_new (FALSE, FALSE, sizeof (Shape));
  g_autoptr(GHashTable) torch_rows = g_hash_table_new_full (g_str_hash, g_str_equal,
                                                            g_free, g_free);
  g_autoptr(GPtrArray) size_names = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *torch_version = NULL;
  g_auto(GStrv) paths = NULL;
  g_auto(GStrv) sizes = NULL;
  g_auto(GStrv) kernels = NULL;  /* per path with --kernels: the Vulkan kernel */
  g_autoptr(GRand) rand = g_rand_new_with_seed (42);
  g_autoptr(GPtrArray) backends = NULL;
  g_autoptr(GPtrArray) operands = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree double *peaks = NULL;           /* per path: the nominal estimate */
  g_autofree double *measured_peaks = NULL;  /* per path: dc_gemm_peak_measure's */
  g_autofree double *dispatch_s = NULL;  /* per path: one empty dispatch, Vulkan only */
  g_autoptr(GArray) results = NULL;
  guint n_paths;
  double mhz = cpu_mhz ();

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (n_threads < 0 || n_threads > 1024)
    return dc_cli_usage_error (command, _("--threads must be between 1 and 1024"));
  if (!(min_time > 0 && min_time <= 60))
    return dc_cli_usage_error (command, _("--min-time must be between 0 and 60 seconds"));
  if (rounds < 1 || rounds > 50)
    return dc_cli_usage_error (command, _("--rounds must be between 1 and 50"));
  if (n_threads == 0)
    n_threads = g_get_num_processors ();
  /* The process's pool default too, for any kernel not handed a count. */
  dc_parallel_set_default_threads ((guint) n_threads);

  if (kernels_text != NULL)
    {
      /* One Vulkan path per kernel: DC_GEMM_VK_KERNEL while it is made. */
      guint n;

      if (paths_text != NULL)
        return dc_cli_usage_error (command, _("--kernels and --paths exclude each other"));
      kernels = g_strsplit (kernels_text, ",", -1);
      n = g_strv_length (kernels);
      /* Each kernel has its own Vulkan context and buffers. */
      if (n == 0 || n > 64)
        return dc_cli_usage_error (command, _("--kernels takes 1 to 64 names"));
      paths = g_new0 (char *, n + 1);
      for (guint i = 0; i < n; i++)
        paths[i] = g_strdup ("vulkan");
    }
  else
    paths = g_strsplit (paths_text ? paths_text : "cpu-scalar,cpu,vulkan", ",", -1);
  sizes = g_strsplit (sizes_text ? sizes_text : "128,512,1024,2048", ",", -1);
  for (guint i = 0; paths[i] != NULL; i++)
    {
      DcBackendKind kind;

      if (!dc_backend_kind_from_string (paths[i], &kind))
        return dc_cli_usage_error (command, _("unknown path “%s” (cpu-scalar, cpu, vulkan)"),
                                   paths[i]);
    }
  for (guint i = 0; sizes[i] != NULL; i++)
    {
      guint64 size;
      Shape shape;

      if (!g_ascii_string_to_unsigned (sizes[i], 10, 1, 16384, &size, NULL))
        return dc_cli_usage_error (command, _("sizes must be between 1 and 16384, not “%s”"),
                                   sizes[i]);
      g_ptr_array_add (size_names, g_strdup_printf ("square-%" G_GUINT64_FORMAT, size));
      shape.name = g_ptr_array_index (size_names, size_names->len - 1);
      shape.m = shape.n = shape.k = size;
      g_array_append_val (shapes, shape);
    }
  if (!no_model)
    g_array_append_vals (shapes, model_shapes, G_N_ELEMENTS (model_shapes));

  /* Backends, peak estimates and operands once; the rounds reuse them. */
  n_paths = g_strv_length (paths);
  backends = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_gemm_backend_free);
  peaks = g_new (double, n_paths);
  measured_peaks = g_new (double, n_paths);
  dispatch_s = g_new (double, n_paths);
  for (guint p = 0; p < n_paths; p++)
    {
      g_autoptr(GError) local_error = NULL;
      DcGemmBackend *backend;
      DcBackendKind kind;

      dc_backend_kind_from_string (paths[p], &kind);
      if (kernels != NULL)
        {
          g_autofree char *saved = g_strdup (g_getenv ("DC_GEMM_VK_KERNEL"));

          g_setenv ("DC_GEMM_VK_KERNEL", kernels[p], TRUE);
          backend = dc_gemm_backend_new (kind, &local_error);
          if (saved != NULL)
            g_setenv ("DC_GEMM_VK_KERNEL", saved, TRUE);
          else
            g_unsetenv ("DC_GEMM_VK_KERNEL");
        }
      else
        backend = dc_gemm_backend_new (kind, &local_error);
      peaks[p] = -1;
      measured_peaks[p] = -1;
      dispatch_s[p] = -1;
      if (backend == NULL || dc_gemm_backend_get_kind (backend) != kind)
        {
          g_printerr (_("bench: path %s unavailable: %s\n"), kernels ? kernels[p] : paths[p],
                      local_error ? local_error->message
                                  : _("its kernels failed verification"));
          g_clear_pointer (&backend, dc_gemm_backend_free);
          g_ptr_array_add (backends, NULL);
          continue;
        }
      dc_gemm_backend_set_n_threads (backend, n_threads);
      if (kind != DC_BACKEND_VULKAN && mhz > 0)
        peaks[p] = (kind == DC_BACKEND_CPU ? n_threads : 1) * mhz * 1e6 *
                   macs_per_cycle (dc_gemm_backend_get_kernel_name (backend)) * 2 / 1e9;
      /* The kernel's instructions on every thread at once, at the clock
       * they really run at (dc-gemm-peak.c); peak_ratio divides by this. */
      if (kind == DC_BACKEND_CPU)
        measured_peaks[p] = dc_gemm_peak_measure (dc_gemm_backend_get_kernel_name (backend),
                                                  n_threads, PEAK_SECONDS);
      /* Vulkan: what one submission and its wait cost, from a product with
       * one workgroup and one K step (1 × 1 × 32), timed like the others;
       * on the H200 a 1024³ product took 0.65 ms, most of it this. */
      if (kind == DC_BACKEND_VULKAN)
        {
          /* Its own generator: the shapes' operands stay those of before. */
          g_autoptr(GRand) tiny_rand = g_rand_new_with_seed (7);
          g_autoptr(DcQuantMatrix) ta = random_matrix (tiny_rand, 1, 32);
          g_autoptr(DcQuantMatrix) tb = random_matrix (tiny_rand, 1, 32);
          double seconds = 0;
          guint repeat;

          if (!dc_gemm_backend_time (backend, ta, tb, 1, &seconds, &error))
            return dc_cli_fail (options, error);
          repeat = (guint) CLAMP (min_time / MAX (seconds, 1e-7), 2, 100000);
          if (!dc_gemm_backend_time (backend, ta, tb, repeat, &seconds, &error))
            return dc_cli_fail (options, error);
          dispatch_s[p] = seconds / repeat;
        }
      g_ptr_array_add (backends, backend);
    }
  operands = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_quant_matrix_free);
  for (guint s = 0; s < shapes->len; s++)
    {
      const Shape *shape = &g_array_index (shapes, Shape, s);

      g_ptr_array_add (operands, random_matrix (rand, shape->m, shape->k));
      g_ptr_array_add (operands, random_matrix (rand, shape->n, shape->k));
    }
  results = g_array_sized_new (FALSE, TRUE, sizeof (Result), n_paths * shapes->len);
  g_array_set_clear_func (results, (GDestroyNotify) result_clear);
  for (guint i = 0; i < n_paths * shapes->len; i++)
    {
      Result result = {
        .gops = g_array_new (FALSE, FALSE, sizeof (double)),
        .cpu_gops = g_array_new (FALSE, FALSE, sizeof (double)),
        .torch = g_array_new (FALSE, FALSE, sizeof (double)),
        .ratio = g_array_new (FALSE, FALSE, sizeof (double)),
        .int8 = g_array_new (FALSE, FALSE, sizeof (double)),
        .queued_gops = g_array_new (FALSE, FALSE, sizeof (double)),
        .gpu_gops = g_array_new (FALSE, FALSE, sizeof (double)),
        .fence_wait_ms = g_array_new (FALSE, FALSE, sizeof (double)),
        .fence_poll_ms = g_array_new (FALSE, FALSE, sizeof (double)),
        .fresh_ms = g_array_new (FALSE, FALSE, sizeof (double)),
      };

      g_array_append_val (results, result);
    }

  for (int r = 0; r < rounds; r++)
    {
      g_hash_table_remove_all (torch_rows);
      if (!no_torch && !run_torch (n_threads, min_time, shapes, torch_rows, &torch_version))
        {
          const char *note = _("PyTorch is not installed, so there is no reference: install "
                               "Debian's python3-torch and libopenblas0-pthread to compare "
                               "(nothing was installed)");

          no_torch = TRUE;
          if (options->json)
            {
              g_autoptr(JsonBuilder) builder = json_builder_new ();

              json_builder_begin_object (builder);
              json_builder_set_member_name (builder, "event");
              json_builder_add_string_value (builder, "note");
              json_builder_set_member_name (builder, "message");
              json_builder_add_string_value (builder, note);
              json_builder_end_object (builder);
              dc_cli_print_json (builder);
            }
          else
            g_print ("%s\n", note);
        }
      else if (!no_torch && r == 0 && !options->json)
        g_print (_("reference: %s\n"), torch_version);

      for (guint p = 0; p < n_paths; p++)
        {
          DcGemmBackend *backend = g_ptr_array_index (backends, p);
          gboolean slow;

          if (backend == NULL)
            continue;
          /* The scalar reference, and any path on a CPU-emulated Vulkan
           * device (lavapipe), would take minutes on the large shapes. */
          slow = dc_gemm_backend_get_kind (backend) == DC_BACKEND_CPU_SCALAR ||
                 (dc_gemm_backend_get_kind (backend) == DC_BACKEND_VULKAN &&
                  strstr (dc_gemm_backend_get_device_name (backend), "llvmpipe") != NULL);

          for (guint s = 0; s < shapes->len; s++)
            {
              const Shape *shape = &g_array_index (shapes, Shape, s);
              const DcQuantMatrix *a = g_ptr_array_index (operands, 2 * s);
              const DcQuantMatrix *b = g_ptr_array_index (operands, 2 * s + 1);
              g_autofree char *key = shape_key (shape->m, shape->n, shape->k);
              TorchRow *torch = g_hash_table_lookup (torch_rows, key);
              Result *result = &g_array_index (results, Result, p * shapes->len + s);
              double ops = 2.0 * shape->m * shape->n * shape->k;
              double seconds = 0, gops, cpu0, cpu1;
              guint repeat;

              if (slow && ops > 2.0 * 512 * 512 * 512)
                continue;
              if (!dc_gemm_backend_time (backend, a, b, 1, &seconds, &error))
                return dc_cli_fail (options, error);
              /* Up to 100,000 repeats: a decode product takes microseconds,
               * and 100 of them were too short a window to time. */
              repeat = (guint) CLAMP (min_time / MAX (seconds, 1e-7), 1, 100000);
              cpu0 = dc_cli_process_cpu_ms () / 1000;
              if (!dc_gemm_backend_time (backend, a, b, repeat, &seconds, &error))
                return dc_cli_fail (options, error);
              cpu1 = dc_cli_process_cpu_ms () / 1000;
              gops = ops * repeat / seconds / 1e9;
              g_array_append_val (result->gops, gops);
              if (dc_gemm_backend_get_kind (backend) != DC_BACKEND_VULKAN && cpu0 >= 0 &&
                  cpu1 > cpu0)
                {
                  double cpu_gops = ops * repeat / (cpu1 - cpu0) / 1e9;

                  g_array_append_val (result->cpu_gops, cpu_gops);
                }
              if (dc_gemm_backend_get_kind (backend) == DC_BACKEND_VULKAN)
                {
                  DcGemmQueuedTiming t;

                  /* The same number of dispatches, queued in one command
                   * buffer; 10,000 at most keeps the recording a few MB. */
                  if (!dc_gemm_backend_time_queued (backend, a, b, CLAMP (repeat, 2, 10000), &t,
                                                    &error))
                    return dc_cli_fail (options, error);
                  if (t.queued > 0)
                    {
                      double v = ops / t.queued / 1e9;

                      g_array_append_val (result->queued_gops, v);
                    }
                  if (t.gpu > 0)
                    {
                      double v = ops / t.gpu / 1e9;

                      g_array_append_val (result->gpu_gops, v);
                    }
                  if (t.fence_wait > 0)
                    {
                      double v = t.fence_wait * 1e3;

                      g_array_append_val (result->fence_wait_ms, v);
                    }
                  if (t.fence_poll > 0)
                    {
                      double v = t.fence_poll * 1e3;

                      g_array_append_val (result->fence_poll_ms, v);
                    }
                  if (t.fresh > 0)
                    {
                      double v = t.fresh * 1e3;

                      g_array_append_val (result->fresh_ms, v);
                    }
                }
              if (torch != NULL && torch->gflops > 0)
                {
                  double ratio = gops / torch->gflops;

                  g_array_append_val (result->torch, torch->gflops);
                  g_array_append_val (result->ratio, ratio);
                }
              if (torch != NULL && torch->int8_gops > 0)
                g_array_append_val (result->int8, torch->int8_gops);
            }
        }
    }

  if (!options->json)
    g_print ("%-24s %-10s %-14s %5s %5s %5s %9s %9s %7s %7s %10s %8s\n", "shape", "path", "kernel",
             "m", "n", "k", "GOPS", "torch", "ratio", "peak", "GOPS/cpu-s", "cpu-peak");
  for (guint p = 0; p < n_paths; p++)
    for (guint s = 0; s < shapes->len; s++)
      {
        const Shape *shape = &g_array_index (shapes, Shape, s);
        DcGemmBackend *backend = g_ptr_array_index (backends, p);
        Result *result = &g_array_index (results, Result, p * shapes->len + s);
        double ratio_min = -1, ratio_max = -1;
        double gops, torch_gflops, ratio, int8, cpu_gops, core_peak, peak;

        if (backend == NULL || result->gops->len == 0)
          continue;
        gops = dc_cli_median (result->gops);
        cpu_gops = dc_cli_median (result->cpu_gops);
        /* The measured peak where there is one, else the estimate. */
        peak = measured_peaks[p] > 0 ? measured_peaks[p] : peaks[p];
        /* One thread's peak: CPU-seconds add up over the threads. */
        core_peak = peak > 0 ? peak / (dc_gemm_backend_get_kind (backend) == DC_BACKEND_CPU
                                       ? n_threads : 1)
                             : -1;
        torch_gflops = dc_cli_median (result->torch);
        ratio = dc_cli_median (result->ratio);   /* sorts: first and last are the range */
        int8 = dc_cli_median (result->int8);
        if (result->ratio->len > 0)
          {
            ratio_min = g_array_index (result->ratio, double, 0);
            ratio_max = g_array_index (result->ratio, double, result->ratio->len - 1);
          }

        if (options->json)
          {
            g_autoptr(JsonBuilder) builder = json_builder_new ();

            json_builder_begin_object (builder);
            json_builder_set_member_name (builder, "shape");
            json_builder_add_string_value (builder, shape->name);
            json_builder_set_member_name (builder, "path");
            json_builder_add_string_value (builder, paths[p]);
            json_builder_set_member_name (builder, "kernel");
            json_builder_add_string_value (builder, dc_gemm_backend_get_kernel_name (backend));
            json_builder_set_member_name (builder, "device");
            json_builder_add_string_value (builder, dc_gemm_backend_get_device_name (backend));
            json_builder_set_member_name (builder, "m");
            json_builder_add_int_value (builder, shape->m);
            json_builder_set_member_name (builder, "n");
            json_builder_add_int_value (builder, shape->n);
            json_builder_set_member_name (builder, "k");
            json_builder_add_int_value (builder, shape->k);
            json_builder_set_member_name (builder, "gops");
            json_builder_add_double_value (builder, gops);
            json_add_double_or_null (builder, "torch_gflops", torch_gflops);
            json_add_double_or_null (builder, "ratio_vs_torch", ratio);
            json_add_double_or_null (builder, "peak_ratio", peak > 0 ? gops / peak : -1);
            json_add_double_or_null (builder, "peak_nominal_gops", peaks[p]);
            json_add_double_or_null (builder, "peak_measured_gops", measured_peaks[p]);
            json_add_double_or_null (builder, "peak_ratio_nominal",
                                     peaks[p] > 0 ? gops / peaks[p] : -1);
            /* The B operand (the weights) streamed per second: what bounds
             * a decode step once it leaves the caches. */
            json_add_double_or_null (builder, "weights_gbytes_per_s",
                                     gops / (2.0 * shape->m));
            json_add_double_or_null (builder, "gops_per_cpu_second", cpu_gops);
            json_add_double_or_null (builder, "cpu_peak_ratio",
                                     core_peak > 0 && cpu_gops > 0 ? cpu_gops / core_peak : -1);
            /* Vulkan: the latency of an almost empty dispatch, and the rate
             * with that latency taken out of each product's time (an
             * estimate of the kernel's own rate; null where not above it). */
            json_add_double_or_null (builder, "dispatch_ms",
                                     dispatch_s[p] > 0 ? dispatch_s[p] * 1e3 : -1);
            {
              double t = 2.0 * shape->m * shape->n * shape->k / (gops * 1e9);

              json_add_double_or_null (builder, "gops_less_dispatch",
                                       dispatch_s[p] > 0 && t > dispatch_s[p]
                                       ? 2.0 * shape->m * shape->n * shape->k
                                         / (t - dispatch_s[p]) / 1e9
                                       : -1);
            }
            json_builder_set_member_name (builder, "rounds");
            json_builder_add_int_value (builder, result->gops->len);
            if (rounds > 1)
              {
                json_add_double_or_null (builder, "ratio_vs_torch_min", ratio_min);
                json_add_double_or_null (builder, "ratio_vs_torch_max", ratio_max);
              }
            if (int8 > 0)
              {
                json_add_double_or_null (builder, "torch_int8_gops", int8);
                json_add_double_or_null (builder, "ratio_vs_torch_int8", gops / int8);
              }
            /* Vulkan: the dispatches queued in one submission with one wait
             * at the end (queued_gops: the figure that compares with
             * torch._int_mm's timing), the same by GPU timestamps, and one
             * dispatch per submission by fence wait and by fence poll. */
            if (result->queued_gops->len > 0)
              {
                double queued = dc_cli_median (result->queued_gops);

                json_add_double_or_null (builder, "queued_gops", queued);
                json_add_double_or_null (builder, "gpu_timestamp_gops",
                                         dc_cli_median (result->gpu_gops));
                json_add_double_or_null (builder, "fence_wait_ms",
                                         dc_cli_median (result->fence_wait_ms));
                json_add_double_or_null (builder, "fence_poll_ms",
                                         dc_cli_median (result->fence_poll_ms));
                json_add_double_or_null (builder, "fence_wait_fresh_ms",
                                         dc_cli_median (result->fresh_ms));
                if (int8 > 0)
                  json_add_double_or_null (builder, "queued_ratio_vs_torch_int8", queued / int8);
              }
            json_builder_end_object (builder);
            dc_cli_print_json (builder);
          }
        else
          {
            g_print ("%-24s %-10s %-14s %5" G_GSIZE_FORMAT " %5" G_GSIZE_FORMAT
                     " %5" G_GSIZE_FORMAT " %9.1f %9.1f %7.2f %7.2f %10.1f %8.2f\n",
                     shape->name, paths[p], dc_gemm_backend_get_kernel_name (backend),
                     shape->m, shape->n, shape->k, gops, torch_gflops,
                     ratio > 0 ? ratio : 0, peak > 0 ? gops / peak : 0,
                     cpu_gops > 0 ? cpu_gops : 0,
                     core_peak > 0 && cpu_gops > 0 ? cpu_gops / core_peak : 0);
            if (rounds > 1 && ratio_min > 0)
              g_print ("%-24s %-10s ratio over %d rounds: %.2f – %.2f\n", "", "", rounds,
                       ratio_min, ratio_max);
            if (int8 > 0)
              g_print ("%-24s %-10s torch._int_mm %9.1f GOPS, ratio %.3f\n", "", "",
                       int8, gops / int8);
          }
      }
  return DC_CLI_EXIT_OK;
}
