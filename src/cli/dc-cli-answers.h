/* dc-cli-answers.h: answers to join requests typed on standard input
 * (`join` and `train --room` with --approve ask).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "mesh/dc-group.h"

G_BEGIN_DECLS

/* One line per request, in the order asked: "accept" (or "y") admits,
 * anything else declines. A plain struct owned by the command's state. */
typedef struct
{
  DcGroup          *group;   /* borrowed */
  GDataInputStream *lines;   /* standard input, opened at the first request */
  GQueue            asks;    /* ids awaiting an answer, oldest first */
} DcCliAnswers;

void dc_cli_answers_init  (DcCliAnswers *self,
                           DcGroup      *group);
void dc_cli_answers_ask   (DcCliAnswers *self,
                           const char   *id);
void dc_cli_answers_clear (DcCliAnswers *self);

G_END_DECLS
