/* dc-ring-plan.c: the ring's plan (see the header).
 *
 * A pipeline runs one token through every layer in turn, so the time per
 * token is the sum of every stage's compute plus one hop per stage: how the
 * layers are spread does not shorten a lap, only who computes them does.
 * So the fastest devices are filled first, each up to the layers its memory
 * holds, and the fewest devices (hence hops) that hold the model are used.
 * The head always holds the embedding, final norm and head.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-ring-plan.h"

#include "model/dc-model-error.h"

void
dc_ring_plan_free (DcRingPlan *plan)
{
  if (plan == NULL)
    return;
  g_clear_pointer (&plan->stages, g_array_unref);
  g_clear_pointer (&plan->excluded, g_ptr_array_unref);
  g_free (plan);
}

guint
dc_ring_plan_get_n_stages (const DcRingPlan *plan)
{
  g_return_val_if_fail (plan != NULL, 0);
  return plan->stages->len;
}

const DcRingStage *
dc_ring_plan_get_stage (const DcRingPlan *plan,
                        guint             i)
{
  g_return_val_if_fail (plan != NULL && i < plan->stages->len, NULL);
  return &g_array_index (plan->stages, DcRingStage, i);
}

int
dc_ring_plan_find_layer (const DcRingPlan *plan,
                         guint             layer)
{
  g_return_val_if_fail (plan != NULL, -1);

  for (guint i = 0; i < plan->stages->len; i++)
    {
      const DcRingStage *s = &g_array_index (plan->stages, DcRingStage, i);

      if (layer >= s->first && layer < s->last)
        return (int) i;
    }
  return -1;
}

static double
compute_ms (double macs,
            double gmacs)
{
  return macs / (gmacs * 1e6);
}

/* Faster first; equal speeds keep the order the devices came in. */
static int
compare_speed (gconstpointer a,
               gconstpointer b,
               gpointer      user_data)
{
  const DcRingDevice *devices = user_data;
  guint i = *(const guint *) a, j = *(const guint *) b;

  if (devices[i].gmacs != devices[j].gmacs)
    return devices[i].gmacs > devices[j].gmacs ? -1 : 1;
  return i < j ? -1 : (i > j ? 1 : 0);
}

/* A plan that fails after devices were left out says which and why. */
static void
add_excluded (GError    **error,
              GPtrArray  *excluded)
{
  g_autoptr(GString) why = NULL;

  if (error == NULL || *error == NULL || excluded->len == 0)
    return;
  why = g_string_new ((*error)->message);
  for (guint i = 0; i < excluded->len; i++)
    g_string_append_printf (why, "%s%s", i == 0 ? " (" : "; ",
                            (const char *) g_ptr_array_index (excluded, i));
  g_string_append_c (why, ')');
  g_free ((*error)->message);
  (*error)->message = g_string_free (g_steal_pointer (&why), FALSE);
}

/**
 * dc_ring_plan_new:
 * @devices: (array length=n_devices): the head first
 *
 * Returns: (transfer full) (nullable): the plan, or %NULL with @error set
 */
DcRingPlan *
dc_ring_plan_new (const DcRingShape   *shape,
                  const DcRingDevice  *devices,
                  guint                n_devices,
                  GError             **error)
{
  g_autoptr(DcRingPlan) plan = NULL;
  g_autoptr(GArray) order = NULL;
  g_autofree guint *layers = NULL;
  const DcRingDevice *head;
  guint left;

  g_return_val_if_fail (shape != NULL && devices != NULL, NULL);
  g_return_val_if_fail (n_devices >= 1 && n_devices <= DC_RING_PLAN_MAX_DEVICES, NULL);

  head = &devices[0];
  plan = g_new0 (DcRingPlan, 1);
  plan->stages = g_array_new (FALSE, TRUE, sizeof (DcRingStage));
  plan->excluded = g_ptr_array_new_with_free_func (g_free);
  if (shape->n_layers == 0 || shape->layer_bytes == 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID, "the model has no layers");
      return NULL;
    }
  if (head->memory_bytes < shape->ends_bytes)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "this device offers %" G_GUINT64_FORMAT " MB; the embedding and head alone "
                   "take %" G_GUINT64_FORMAT " MB", head->memory_bytes / 1000000,
                   shape->ends_bytes / 1000000);
      return NULL;
    }

  /* How many layers each device could hold; a disagreeing probe, none. */
  layers = g_new0 (guint, n_devices);
  order = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < n_devices; i++)
    {
      const DcRingDevice *d = &devices[i];

      if (i > 0 && g_strcmp0 (d->probe_hash, head->probe_hash) != 0)
        {
          g_ptr_array_add (plan->excluded,
                           g_strdup_printf ("“%s” stays out of the plan: kernel probe %s "
                                            "differs from this device's %s", d->name,
                                            d->probe_hash, head->probe_hash));
          continue;
        }
      if (!(d->gmacs > 0.0))
        {
          g_ptr_array_add (plan->excluded,
                           g_strdup_printf ("“%s” stays out of the plan: no measured speed",
                                            d->name));
          continue;
        }
      g_array_append_val (order, i);
    }

  /* A head that can hold every layer runs alone: no hop is faster than none. */
  if (head->memory_bytes >= shape->ends_bytes &&
      (head->memory_bytes - shape->ends_bytes) / shape->layer_bytes >= shape->n_layers)
    {
      layers[0] = shape->n_layers;
      g_array_set_size (order, 1);
    }
  else
    {
      g_array_sort_with_data (order, compare_speed, (gpointer) devices);
      left = shape->n_layers;
      for (guint k = 0; k < order->len && left > 0; k++)
        {
          guint i = g_array_index (order, guint, k);
          /* The head's memory covers the ends (checked above). */
          guint64 room = devices[i].memory_bytes - (i == 0 ? shape->ends_bytes : 0);
          guint fit = (guint) MIN ((guint64) left, room / shape->layer_bytes);

          layers[i] = fit;
          left -= fit;
        }
      if (left > 0)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "the group cannot hold the model: its devices hold %u of its %u layers; "
                       "add a device or pick a smaller model", shape->n_layers - left,
                       shape->n_layers);
          add_excluded (error, plan->excluded);
          return NULL;
        }
    }

  /* Ring order: the head (embedding and its layers first), then the
   * others as they came; each takes the next contiguous run. */
  {
    guint next = 0;

    for (guint i = 0; i < n_devices; i++)
      {
        DcRingStage stage = { 0 };

        if (i > 0 && layers[i] == 0)
          continue;
        stage.device = i;
        stage.first = next;
        stage.last = next + layers[i];
        stage.ends = i == 0;
        next = stage.last;
        stage.download_bytes = shape->layer_download * layers[i] +
                               (stage.ends ? shape->ends_download : 0);
        stage.hold_bytes = shape->layer_bytes * layers[i] + (stage.ends ? shape->ends_bytes : 0);
        stage.ms_per_token = compute_ms (shape->layer_macs * layers[i] +
                                         (stage.ends ? shape->ends_macs : 0),
                                         devices[i].gmacs > 0 ? devices[i].gmacs : 1.0);
        plan->lap_ms += stage.ms_per_token;
        g_array_append_val (plan->stages, stage);
      }
    g_assert (next == shape->n_layers);
  }
  plan->hop_ms = shape->hop_ms;
  /* One hop to each stage after the head and one back. */
  if (plan->stages->len > 1)
    plan->lap_ms += shape->hop_ms * plan->stages->len;
  if (plan->lap_ms > DC_RING_PLAN_MAX_LAP_MS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "refusing the run: estimated %.0f ms per token, above the lap budget of "
                   "%.0f s; add a faster device or lower the context length", plan->lap_ms,
                   DC_RING_PLAN_MAX_LAP_MS / 1000.0);
      add_excluded (error, plan->excluded);
      return NULL;
    }
  return g_steal_pointer (&plan);
}
