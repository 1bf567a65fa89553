/* test-mesh-gst-quirks.c: the sctp plugin's teardown warning, and only it,
 * is kept from aborting a program that runs with fatal warnings.
 *
 * The warning is produced the way the plugin produces it: GObject's own
 * checked cast of a finalised instance (zeroed memory, as G_DEBUG=gc-friendly
 * leaves it) to a type named GstSctpAssociation, registered here so that the
 * test needs no plugin.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include <glib-object.h>

#include "mesh/dc-gst-quirks.h"

typedef struct { GObject parent; int field; } FakeAssociation;
typedef struct { GObjectClass parent; } FakeAssociationClass;

/* A GObject type of that name: GObject's cast check prints the name. */
static GType
register_named (const char *name)
{
  GType type = g_type_from_name (name);

  if (type == 0)
    type = g_type_register_static_simple (G_TYPE_OBJECT, name, sizeof (FakeAssociationClass),
                                          NULL, sizeof (FakeAssociation), NULL, 0);
  return type;
}

/* What the plugin's callback does with a freed association. */
static int
cast_freed (GType type)
{
  FakeAssociation *freed = g_malloc0 (sizeof *freed);
  FakeAssociation *cast;
  int field;

  cast = G_TYPE_CHECK_INSTANCE_CAST (freed, type, FakeAssociation);
  field = cast->field;
  g_free (freed);
  return field;
}

static void
test_matches (void)
{
  g_assert_true (dc_gst_quirks_is_sctp_teardown_warning (
    "GLib-GObject", "invalid uninstantiatable type '(null)' in cast to 'GstSctpAssociation'"));
  g_assert_true (dc_gst_quirks_is_sctp_teardown_warning (
    "GLib-GObject", "invalid unclassed pointer in cast to 'GstSctpAssociation'"));
  g_assert_true (dc_gst_quirks_is_sctp_teardown_warning (
    "GLib-GObject", "invalid cast from 'GstBuffer' to 'GstSctpAssociation'"));
  g_assert_false (dc_gst_quirks_is_sctp_teardown_warning (
    "GLib-GObject", "invalid uninstantiatable type '(null)' in cast to 'DcPeer'"));
  g_assert_false (dc_gst_quirks_is_sctp_teardown_warning (
    "dc-mesh", "invalid uninstantiatable type '(null)' in cast to 'GstSctpAssociation'"));
  g_assert_false (dc_gst_quirks_is_sctp_teardown_warning (
    "GLib-GObject", "instance of invalid non-instantiatable type 'GstSctpAssociation'"));
  g_assert_false (dc_gst_quirks_is_sctp_teardown_warning (NULL, NULL));
}

/* In a child with warnings fatal: the plugin's warning is printed and the
 * program goes on; a cast to any other type still aborts it. */
static void
test_child (void)
{
  if (g_test_subprocess ())
    {
      g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
      dc_gst_quirks_install ();
      g_assert_cmpint (cast_freed (register_named (g_getenv ("QUIRKS_TYPE"))), ==, 0);
      g_print ("went on\n");
    }
}

/* The same through dc_gst_quirks_add_test (): the case installs nothing
 * itself, and the test program's g_test_run () cleared any fatal handler
 * main() set (GLib 2.74), as in every test program that stops peers. */
static void
test_child_added (void)
{
  if (g_test_subprocess () || g_getenv ("QUIRKS_RUN") != NULL)
    {
      g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
      g_assert_cmpint (cast_freed (register_named (g_getenv ("QUIRKS_TYPE"))), ==, 0);
      g_print ("went on\n");
    }
}

/* Runs the child (@path) casting a freed instance to the type @type_name. */
static void
run_child_at (const char *path,
              const char *type_name)
{
  g_setenv ("QUIRKS_TYPE", type_name, TRUE);
  g_test_trap_subprocess (path, 10 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
}

static void
run_child (const char *type_name)
{
  run_child_at ("/mesh/gst-quirks/child", type_name);
}

static void
test_sctp_warning_not_fatal (void)
{
  run_child ("GstSctpAssociation");
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*in cast to 'GstSctpAssociation'*");
  g_test_trap_assert_stdout ("*went on*");
  /* A TAP harness fails a test on this line, even when it goes on. */
  g_test_trap_assert_stdout_unmatched ("*Bail out!*");
}

/* dc_gst_quirks_add_test (): the case is quirked without installing in it. */
static void
test_added_case_not_fatal (void)
{
  run_child_at ("/mesh/gst-quirks/child-added", "GstSctpAssociation");
  g_test_trap_assert_passed ();
  g_test_trap_assert_stdout ("*went on*");
  g_test_trap_assert_stdout_unmatched ("*Bail out!*");
  run_child_at ("/mesh/gst-quirks/child-added", "DcQuirksOther");
  g_test_trap_assert_failed ();
  g_test_trap_assert_stdout_unmatched ("*went on*");
}

/* As a test program of its own (TAP on its output, not a trapped
 * subprocess): the warning leaves no "Bail out!" in the output, which
 * meson would count as a failure even though the program goes on. */
static void
test_tap_output (void)
{
  const char *argv[] = { "/proc/self/exe", "-p", "/mesh/gst-quirks/child-added", NULL };
  g_auto(GStrv) envp = g_get_environ ();
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  int status = -1;

  envp = g_environ_setenv (envp, "QUIRKS_RUN", "1", TRUE);
  envp = g_environ_setenv (envp, "QUIRKS_TYPE", "GstSctpAssociation", TRUE);
  envp = g_environ_setenv (envp, "G_DEBUG", "fatal-warnings", TRUE);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, envp, G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                               NULL, &out, NULL, &status, &error));
  g_assert_no_error (error);
  g_test_message ("child's output: %s", out);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_nonnull (strstr (out, "went on"));
  g_assert_nonnull (strstr (out, "ok 1 /mesh/gst-quirks/child-added"));
  g_assert_null (strstr (out, "Bail out!"));
}

static void
test_other_warning_fatal (void)
{
  run_child ("DcQuirksOther");
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*in cast to 'DcQuirksOther'*");
  g_test_trap_assert_stdout_unmatched ("*went on*");
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mesh/gst-quirks/matches", test_matches);
  g_test_add_func ("/mesh/gst-quirks/child", test_child);
  dc_gst_quirks_add_test ("/mesh/gst-quirks/child-added", test_child_added);
  g_test_add_func ("/mesh/gst-quirks/sctp-warning-not-fatal", test_sctp_warning_not_fatal);
  g_test_add_func ("/mesh/gst-quirks/other-warning-fatal", test_other_warning_fatal);
  g_test_add_func ("/mesh/gst-quirks/added-case-not-fatal", test_added_case_not_fatal);
  g_test_add_func ("/mesh/gst-quirks/tap-output", test_tap_output);
  return g_test_run ();
}
