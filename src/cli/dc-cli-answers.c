/* dc-cli-answers.c: answers to join requests typed on standard input.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include "dc-cli-answers.h"

#include <gio/gunixinputstream.h>

static void read_answer (DcCliAnswers *self);

static void
answer_cb (GObject      *object,
           GAsyncResult *result,
           gpointer      user_data)
{
  DcCliAnswers *self = user_data;
  g_autofree char *line = NULL;
  g_autofree char *id = NULL;

  line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (object), result,
                                                     NULL, NULL);
  if (line == NULL)
    return;  /* stdin closed: the remaining requests stay unanswered */
  id = g_queue_pop_head (&self->asks);
  if (id != NULL)
    dc_group_answer_request (self->group, id,
                             g_ascii_strcasecmp (g_strstrip (line), "accept") == 0
                             || g_ascii_strcasecmp (line, "y") == 0);
  if (!g_queue_is_empty (&self->asks))
    read_answer (self);
}

static void
read_answer (DcCliAnswers *self)
{
  if (self->lines == NULL)
    {
      g_autoptr(GInputStream) in = g_unix_input_stream_new (0, FALSE);

      self->lines = g_data_input_stream_new (in);
    }
  g_data_input_stream_read_line_async (self->lines, G_PRIORITY_DEFAULT, NULL, answer_cb, self);
}

void
dc_cli_answers_init (DcCliAnswers *self,
                     DcGroup      *group)
{
  self->group = group;
  self->lines = NULL;
  g_queue_init (&self->asks);
}

/* Queues @id; a read is started only when none is pending, so the lines
 * answer the requests in the order they came. */
void
dc_cli_answers_ask (DcCliAnswers *self,
                    const char   *id)
{
  gboolean idle = g_queue_is_empty (&self->asks);

  g_queue_push_tail (&self->asks, g_strdup (id));
  if (idle)
    read_answer (self);
}

void
dc_cli_answers_clear (DcCliAnswers *self)
{
  g_queue_clear_full (&self->asks, g_free);
  g_clear_object (&self->lines);
}
