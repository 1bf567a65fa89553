/* dc-token-dialog.c: asks for a Hugging Face token after a 401 or 403.
 *
 * Shown only when a request failed for want of a token (the seed: "asked
 * once, and only when a request actually fails"), never before. It says
 * which repository and why, and puts the token into the DcHfClient, which
 * keeps it in memory only and sends it only to the Hub. "Forget Token"
 * removes it at once. Whoever shows the dialog retries on the "use" response.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-token-dialog.h"
#include "data/dc-data-error.h"

struct _DcTokenDialog
{
  AdwMessageDialog  parent_instance;

  /* template widgets */
  AdwEntryRow      *token_row;

  /* owned references */
  DcHfClient       *client;
};

G_DEFINE_FINAL_TYPE (DcTokenDialog, dc_token_dialog, ADW_TYPE_MESSAGE_DIALOG)

/**
 * dc_token_dialog_wants:
 * @error: (nullable): why a request failed
 *
 * Returns: whether @error is one a token can answer: 401 (no token, or
 *   a refused one) or 403 (the token may not read the repository)
 */
gboolean
dc_token_dialog_wants (const GError *error)
{
  return g_error_matches (error, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED)
         || g_error_matches (error, DC_DATA_ERROR, DC_DATA_ERROR_FORBIDDEN);
}

static void
token_changed_cb (DcTokenDialog *self)
{
  g_autofree char *token = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->token_row))));

  adw_message_dialog_set_response_enabled (ADW_MESSAGE_DIALOG (self), "use", *token != '\0');
}

static void
token_activated_cb (DcTokenDialog *self)
{
  if (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (self), "use"))
    adw_message_dialog_response (ADW_MESSAGE_DIALOG (self), "use");
}

/* Connected in init, so it runs before the handlers of whoever showed the
 * dialog: the token is in place (or gone) when they retry. */
static void
response_cb (DcTokenDialog *self,
             const char    *response)
{

  if (g_str_equal (response, "use"))
    dc_hf_client_set_token (self->client, gtk_editable_get_text (GTK_EDITABLE (self->token_row)));
  else if (g_str_equal (response, "forget"))
    dc_hf_client_set_token (self->client, NULL);
  /* The entry's copy goes with the dialog; clear it now rather than later. */
  gtk_editable_set_text (GTK_EDITABLE (self->token_row), "");
}

/**
 * dc_token_dialog_new:
 * @client: whose token the dialog sets or forgets
 * @what: the repository, e.g. "meta-llama/Llama-3.2-1B"
 * @error: the 401 or 403 (dc_token_dialog_wants() is true for it)
 *
 * Returns: (transfer none): a new modal dialog, not yet presented
 */
DcTokenDialog *
dc_token_dialog_new (GtkWindow    *parent,
                     DcHfClient   *client,
                     const char   *what,
                     const GError *error)
{
  DcTokenDialog *self;
  g_autofree char *body = NULL;
  const char *heading;
  gboolean has_token;

  g_return_val_if_fail (DC_IS_HF_CLIENT (client), NULL);
  g_return_val_if_fail (what != NULL, NULL);
  g_return_val_if_fail (dc_token_dialog_wants (error), NULL);

  self = g_object_new (DC_TYPE_TOKEN_DIALOG,
                       "transient-for", parent,
                       "modal", TRUE,
                       NULL);
  self->client = g_object_ref (client);
  has_token = dc_hf_client_has_token (client);

  if (g_error_matches (error, DC_DATA_ERROR, DC_DATA_ERROR_FORBIDDEN))
    {
      heading = _("Access Forbidden");
      body = g_strdup_printf (_("The Hub refused access to “%s”: it is gated or private, and "
                                "the token may not read it. For a gated model, accept its "
                                "licence on the model page first — a token alone will not get "
                                "past a licence you have not accepted. Then try again, or use "
                                "a token of an account with access."), what);
    }
  else if (has_token)
    {
      heading = _("Token Refused");
      body = g_strdup_printf (_("The Hub refused the Hugging Face token for “%s”. Paste "
                                "another read token, or forget this one."), what);
    }
  else
    {
      heading = _("Hugging Face Token Needed");
      body = g_strdup_printf (_("“%s” needs a Hugging Face token: it is gated or private. "
                                "Create a read token at huggingface.co/settings/tokens and "
                                "paste it here. It is kept in memory only, sent only to the "
                                "Hub, and forgotten when DaisyChain quits."), what);
    }
  adw_message_dialog_set_heading (ADW_MESSAGE_DIALOG (self), heading);
  adw_message_dialog_set_body (ADW_MESSAGE_DIALOG (self), body);
  adw_message_dialog_set_response_enabled (ADW_MESSAGE_DIALOG (self), "forget", has_token);
  return self;
}

static void
dc_token_dialog_dispose (GObject *object)
{
  DcTokenDialog *self = DC_TOKEN_DIALOG (object);

  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_TOKEN_DIALOG);
  g_clear_object (&self->client);

  G_OBJECT_CLASS (dc_token_dialog_parent_class)->dispose (object);
}

static void
dc_token_dialog_class_init (DcTokenDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dc_token_dialog_dispose;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-token-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, DcTokenDialog, token_row);
  gtk_widget_class_bind_template_callback (widget_class, token_changed_cb);
  gtk_widget_class_bind_template_callback (widget_class, token_activated_cb);
}

static void
dc_token_dialog_init (DcTokenDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  g_signal_connect (self, "response", G_CALLBACK (response_cb), NULL);
}
