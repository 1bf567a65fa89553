/* dc-regular-file.c: see dc-regular-file.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-core"

#include "config.h"

#include "dc-regular-file.h"

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <glib/gstdio.h>
#include <gio/gio.h>

static void
set_errno_error (GError     **error,
                 int          saved_errno,
                 const char  *path)
{
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved_errno),
               "Failed to open file “%s”: %s", path, g_strerror (saved_errno));
}

static void
set_not_regular_error (GError     **error,
                       const char  *path)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE,
               "“%s” is not a regular file", path);
}

/* Returns a descriptor open for reading on a regular file, or -1. */
static int
open_regular (const char  *path,
              GError     **error)
{
  GStatBuf st;
  struct stat fst;
  int fd;
  int flags;

  /* stat () first so that a device is never opened at all: opening some
   * (tapes, terminals) has effects of its own. */
  if (g_stat (path, &st) != 0)
    {
      set_errno_error (error, errno, path);
      return -1;
    }
  if (!S_ISREG (st.st_mode))
    {
      set_not_regular_error (error, path);
      return -1;
    }
  /* O_NONBLOCK: if the path became a FIFO since the stat (), open () still
   * returns at once, and the fstat () below refuses it. */
  fd = g_open (path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
  if (fd < 0)
    {
      set_errno_error (error, errno, path);
      return -1;
    }
  if (fstat (fd, &fst) != 0 || !S_ISREG (fst.st_mode))
    {
      set_not_regular_error (error, path);
      close (fd);
      return -1;
    }
  /* A regular file never blocks, but plain reads are what callers expect. */
  flags = fcntl (fd, F_GETFL);
  if (flags != -1)
    fcntl (fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

/**
 * dc_regular_file_map:
 *
 * Maps @path read-only, refusing anything that is not a regular file
 * (%G_IO_ERROR_NOT_REGULAR_FILE, "“PATH” is not a regular file").
 *
 * Returns: (transfer full): the mapping, or %NULL with @error set
 */
GMappedFile *
dc_regular_file_map (const char  *path,
                     GError     **error)
{
  GMappedFile *mapped;
  int fd;

  g_return_val_if_fail (path != NULL, NULL);

  fd = open_regular (path, error);
  if (fd < 0)
    return NULL;
  mapped = g_mapped_file_new_from_fd (fd, FALSE, error);
  if (mapped == NULL)
    g_prefix_error (error, "%s: ", path);
  /* The mapping outlives the descriptor. */
  close (fd);
  return mapped;
}

/**
 * dc_regular_file_get_contents:
 * @max_size: the largest file accepted, in bytes
 * @contents: (out) (transfer full): the bytes, NUL-terminated
 *
 * g_file_get_contents () for a regular file of at most @max_size bytes.
 */
gboolean
dc_regular_file_get_contents (const char  *path,
                              gsize        max_size,
                              char       **contents,
                              gsize       *length,
                              GError     **error)
{
  g_autoptr(GMappedFile) mapped = NULL;
  gsize size;

  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (contents != NULL, FALSE);

  mapped = dc_regular_file_map (path, error);
  if (mapped == NULL)
    return FALSE;
  size = g_mapped_file_get_length (mapped);
  if (size > max_size)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "“%s” is too large (%" G_GSIZE_FORMAT " bytes, at most %" G_GSIZE_FORMAT ")",
                   path, size, max_size);
      return FALSE;
    }
  *contents = g_malloc (size + 1);
  if (size > 0)
    memcpy (*contents, g_mapped_file_get_contents (mapped), size);
  (*contents)[size] = '\0';
  if (length != NULL)
    *length = size;
  return TRUE;
}
