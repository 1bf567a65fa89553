/* dc-test-utils.h: helpers shared by the test programs.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef gboolean (*DcTestCondition) (gpointer user_data);

gboolean  dc_test_wait_until        (DcTestCondition   condition,
                                     gpointer          user_data,
                                     guint             timeout_ms);
void      dc_test_finalize_object   (gpointer          object,
                                     guint             timeout_ms);
char     *dc_test_dup_source_path   (const char       *first_element,
                                     ...) G_GNUC_NULL_TERMINATED;
char     *dc_test_dup_build_path    (const char       *first_element,
                                     ...) G_GNUC_NULL_TERMINATED;
guint16   dc_test_closed_port       (void);
void      dc_test_remove_tree       (const char        *path);
int       dc_test_run_cli           (const char * const *args,
                                     char             **stdout_text,
                                     char             **stderr_text,
                                     guint              timeout_ms);
gboolean  dc_test_spawn             (const char * const *argv,
                                     char             **stdout_text,
                                     char             **stderr_text,
                                     int               *exit_status,
                                     guint              timeout_ms);
gboolean  dc_test_run_ip            (const char        *command_line);
const char *dc_test_use_lavapipe    (void);
void      dc_test_skip_without_vulkan (const char       *reason);

/* A local Hub serving tests/data/hf/models on loopback (see dc-test-utils.c). */
typedef struct _DcTestHub DcTestHub;

DcTestHub  *dc_test_hub_start            (gboolean          ignore_ranges);
const char *dc_test_hub_get_url          (DcTestHub        *hub);
guint64     dc_test_hub_get_weight_bytes (DcTestHub        *hub);
void        dc_test_hub_stop             (DcTestHub        *hub);

G_END_DECLS
