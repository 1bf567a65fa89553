/* dc-test-proc.h: daisychain-cli child processes whose --json lines a test reads.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* One child process and the JSON event lines it printed, read as they come
 * while the test iterates the main context. */
typedef struct
{
  char             *label;
  GSubprocess      *process;
  GDataInputStream *lines;
  GPtrArray        *events;      /* JsonObject* */
  GPtrArray        *times;       /* gint64* monotonic µs, one per event */
  GCancellable     *cancellable;
  gboolean          eof;
  gboolean          exited;
  int               exit_status;
} DcTestProc;

DcTestProc *dc_test_proc_spawn       (const char         *label,
                                      const char         *netns,
                                      gboolean            with_stdin,
                                      const char * const *args);
void        dc_test_proc_write       (DcTestProc         *proc,
                                      const char         *text);
void        dc_test_proc_free        (DcTestProc         *proc);
int         dc_test_proc_find        (DcTestProc         *proc,
                                      guint               from,
                                      const char         *event,
                                      const char         *peer);
JsonObject *dc_test_proc_expect      (DcTestProc         *proc,
                                      const char         *event,
                                      const char         *peer,
                                      guint               timeout_ms);
gboolean    dc_test_proc_exited      (gpointer            proc);
int         dc_test_proc_expect_exit (DcTestProc         *proc,
                                      guint               timeout_ms);

/* The net tests' group runs (test-train-group*.c): far above what an event
 * takes on an idle machine; on a loaded 2-core machine processes stall for
 * seconds. */
#define DC_TEST_PROC_EVENT_BOUND_MS 60000

DcTestProc *dc_test_proc_spawn_args      (const char  *label,
                                          ...) G_GNUC_NULL_TERMINATED;
char       *dc_test_proc_start_signal    (DcTestProc **out);
DcTestProc *dc_test_proc_start_host      (const char  *url,
                                          const char  *stop_at,
                                          const char  *min_peers,
                                          char       **room);
DcTestProc *dc_test_proc_start_host_with (const char  *url,
                                          const char  *stop_at,
                                          const char  *min_peers,
                                          char       **room,
                                          ...) G_GNUC_NULL_TERMINATED;
DcTestProc *dc_test_proc_start_follower  (const char  *url,
                                          const char  *room,
                                          const char  *name,
                                          const char  *stop_at,
                                          ...) G_GNUC_NULL_TERMINATED;

/* Reading a group run's events. */
GPtrArray  *dc_test_proc_steps           (DcTestProc  *proc,
                                          gboolean     retakes);
JsonObject *dc_test_proc_step_at         (GPtrArray   *steps,
                                          guint        step);
const char *dc_test_proc_hash_at         (GPtrArray   *steps,
                                          guint        step);
void        dc_test_proc_wait_done       (DcTestProc  *proc,
                                          guint        step,
                                          guint        timeout_ms);
gboolean    dc_test_proc_message_has     (JsonObject  *event,
                                          const char  *text);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcTestProc, dc_test_proc_free)

G_END_DECLS
