/* main.c: the daisychain application.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <locale.h>
#include <glib/gi18n.h>

#include "dc-application.h"
#include "mesh/dc-gst-quirks.h"

int
main (int    argc,
      char **argv)
{
  g_autoptr(DcApplication) app = NULL;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  dc_gst_quirks_install ();
  app = dc_application_new ();
  return g_application_run (G_APPLICATION (app), argc, argv);
}
