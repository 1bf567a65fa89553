/* dc-train-group-memory.c: Advanced sizes in a group (issue 15, item 3):
 * what a group member needs, what each device announces in its hello, the
 * starter's check of the roster before it sends an Advanced CONFIG, a
 * follower's or joiner's check of its own memory, and the wire caps that
 * follow the run's parameter count. See dc-train-group.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

/**
 * dc_train_group_memory_need:
 * @config: the model
 * @batch: sequences per device and step
 *
 * The memory one device of a group needs for a run of @config at @batch:
 * what training alone needs (dc_gpt_train_memory ()), what the audits add
 * (dc_train_plan_audit_bytes (): the audit trainer, its snapshots), the
 * exchange's objects of the step being taken and of the
 * DC_TRAIN_GROUP_REPAIR_STEPS steps kept for repairs (each a summed
 * gradient, this device's gradient and the contributions it got: three
 * gradients a step), the streamed reduce's copies of the step being taken
 * (the contributions to its shard as their chunks came, and its summed
 * shard as it builds and sends it: one gradient more at most), and a
 * joiner's state blob (weights and both Adam moments) that the leader
 * builds and a joiner receives.
 *
 * Returns: bytes
 */
guint64
dc_train_group_memory_need (const DcGptConfig *config,
                            guint              batch)
{
  DcGptMemory solo;

  dc_gpt_train_memory (config, batch, 0, &solo);
  return solo.total_bytes + dc_train_plan_audit_bytes (&solo)
         + (guint64) (DC_TRAIN_GROUP_REPAIR_STEPS + 1) * 3 * solo.grads_bytes
         + solo.grads_bytes + 3 * solo.grads_bytes;
}

/* A byte count from the environment (tests), or 0 when unset. */
static guint64
test_memory (const char *name)
{
  const char *text = g_getenv (name);

  return text != NULL ? g_ascii_strtoull (text, NULL, 10) : 0;
}

/* This device's available memory: DC_TEST_AVAILABLE_MEMORY (bytes) lets a
 * test stand for a small device. */
static guint64
local_memory (void)
{
  guint64 memory = test_memory ("DC_TEST_AVAILABLE_MEMORY");

  return memory > 0 ? memory : dc_train_available_memory ();
}

/**
 * dc_train_group_announced_memory:
 *
 * What this device announces in its hello (DcMeshHello.memory): its
 * available memory now, at most DC_MESH_HELLO_MEMORY_MAX; 0 when unknown.
 * DC_TEST_ANNOUNCE_MEMORY (bytes) makes a test device claim another amount
 * than it has, to check that a claim alone is never trusted.
 */
guint64
dc_train_group_announced_memory (void)
{
  guint64 memory = test_memory ("DC_TEST_ANNOUNCE_MEMORY");

  if (memory == 0)
    memory = local_memory ();
  return MIN (memory, DC_MESH_HELLO_MEMORY_MAX);
}

/* The model a config of @config's size names (dc_train_plan_new ()'s rule). */
static void
config_model (const DcMeshRunConfig *config,
              DcGptConfig           *out)
{
  dc_gpt_config_init_derived (out, config->width, config->seq);
  if (config->n_layer > 0)
    out->n_layer = config->n_layer;
  if (config->n_head > 0)
    out->n_head = config->n_head;
}

static gboolean
config_is_advanced (const DcMeshRunConfig *config)
{
  return config->n_layer > 0 || config->n_head > 0;
}

static char *
describe_size (const DcMeshRunConfig *config)
{
  DcGptConfig model;

  config_model (config, &model);
  return g_strdup_printf ("width %u, %u layers, %u heads, sequence %u, batch %u", model.width,
                          model.n_layer, model.n_head, model.seq, config->batch);
}

/* The starter: the size its request asks for goes into @config. A size
 * that the seeds' rule derives from the width and sequence travels as it
 * always did (layers and heads 0, which every build reads); any other
 * (the Advanced range, or other layers or heads) names its layers and
 * heads, which an older build refuses rather than training another model. */
void
_dc_train_group_config_set_size (DcTrainGroup    *self,
                                 DcMeshRunConfig *config)
{
  DcGptConfig derived, asked;

  dc_gpt_config_init_derived (&derived, config->width, config->seq);
  asked = derived;
  if (self->request.n_layer > 0)
    asked.n_layer = self->request.n_layer;
  if (self->request.n_head > 0)
    asked.n_head = self->request.n_head;
  config->n_layer = 0;
  config->n_head = 0;
  if (dc_gpt_config_equal (&asked, &derived) && dc_gpt_config_in_seed_range (&asked))
    return;
  /* The plan validated the request; a byte holds every layer and head
   * count it allows (at most 12 layers, heads dividing a width ≤ 768). */
  config->n_layer = (guint8) MIN (asked.n_layer, 255u);
  config->n_head = (guint8) MIN (asked.n_head, 255u);
}

/* Any device about to prepare the run: the request it builds its plan from
 * takes the config's size, never its own flags. */
void
_dc_train_group_request_set_size (DcTrainGroup      *self,
                                  DcTrainingRequest *request)
{
  request->n_layer = self->config->n_layer;
  request->n_head = self->config->n_head;
  request->advanced = config_is_advanced (self->config);
}

/* Whether @peer announced enough memory for the run of @config; else
 * @why (nullable) says what it announced. */
static gboolean
peer_can_hold (DcPeer                *peer,
               const DcMeshRunConfig *config,
               guint64                need,
               char                 **why)
{
  DcMeshHello *hello = dc_peer_get_hello (peer);
  g_autofree char *need_text = g_format_size (need);

  if (hello != NULL && hello->memory >= need)
    return TRUE;
  if (why != NULL)
    {
      g_autofree char *size = describe_size (config);

      if (hello == NULL || hello->memory == 0)
        *why = g_strdup_printf ("the Advanced size (%s) needs %s of memory on each device of a "
                                "group, and “%s” did not announce its memory (an older build "
                                "of DaisyChain): update it, or train one of the seeds' sizes",
                                size, need_text, dc_peer_get_name (peer));
      else
        {
          g_autofree char *have = g_format_size (hello->memory);

          *why = g_strdup_printf ("the Advanced size (%s) needs %s of memory on each device of "
                                  "a group, and “%s” has %s available: choose a smaller size, "
                                  "or train without that device", size, need_text,
                                  dc_peer_get_name (peer), have);
        }
    }
  return FALSE;
}

/* The starter, before it sends an Advanced CONFIG: every admitted device
 * it is about to send it to (as send_config () picks them) and this one
 * must hold the run. */
gboolean
_dc_train_group_check_roster_memory (DcTrainGroup          *self,
                                     const DcMeshRunConfig *config,
                                     GError               **error)
{
  g_autoptr(GPtrArray) peers = NULL;
  DcGptConfig model;
  guint64 need;
  guint n = 1;

  if (!config_is_advanced (config))
    return TRUE;
  config_model (config, &model);
  need = dc_train_group_memory_need (&model, config->batch);
  if (!_dc_train_group_check_own_memory_for (self, config, error))
    return FALSE;
  peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
  for (guint i = 0; i < peers->len && n < DC_MESH_ROSTER_MAX; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);
      g_autofree char *why = NULL;

      if (_dc_train_group_find_peer (self, dc_peer_get_id (peer)) == NULL
          || !_dc_train_group_admitted (self, peer))
        continue;
      n++;
      if (!peer_can_hold (peer, config, need, &why))
        {
          g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_MEMORY, "%s", why);
          return FALSE;
        }
    }
  return TRUE;
}

/* This device, for the run of @config: its own memory, measured now (not
 * what it announced: that may be old, and a peer's word is not needed). */
gboolean
_dc_train_group_check_own_memory_for (DcTrainGroup          *self,
                                      const DcMeshRunConfig *config,
                                      GError               **error)
{
  DcGptConfig model;
  guint64 need, have;
  g_autofree char *size = NULL, *need_text = NULL, *have_text = NULL;

  if (!config_is_advanced (config))
    return TRUE;
  config_model (config, &model);
  need = dc_train_group_memory_need (&model, config->batch);
  have = local_memory ();
  /* An unknown amount passes, as dc_train_plan_check_memory () does. */
  if (have == 0 || have >= need)
    return TRUE;
  size = describe_size (config);
  need_text = g_format_size (need);
  have_text = g_format_size (have);
  g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_MEMORY,
               "this device cannot hold the run's Advanced size (%s): a device of the group "
               "needs %s of memory, this one has %s available", size, need_text, have_text);
  return FALSE;
}

/* The leader, before it announces @peer as a joiner: an Advanced run takes
 * only a device that announced enough. A refusal is a notice, once per
 * device. */
gboolean
_dc_train_group_joiner_can_hold (DcTrainGroup *self,
                                 DcPeer       *peer)
{
  DcGptConfig model;
  g_autofree char *why = NULL, *key = NULL, *text = NULL;

  if (!config_is_advanced (self->config))
    return TRUE;
  config_model (self->config, &model);
  if (peer_can_hold (peer, self->config, dc_train_group_memory_need (&model, self->config->batch),
                     &why))
    return TRUE;
  key = g_strconcat ("memory/", dc_peer_get_id (peer), NULL);
  if (!g_hash_table_contains (self->logged, key))
    {
      g_hash_table_add (self->logged, g_steal_pointer (&key));
      text = g_strdup_printf ("“%s” cannot join the run: %s", dc_peer_get_name (peer), why);
      _dc_train_group_notice (self, "cannot-join", dc_peer_get_name (peer), text);
    }
  return FALSE;
}

/* The caps on what peers send in this run, from the plan of the accepted
 * config (dc-train-wire.h); before there is one, the seeds' caps. */
guint64
_dc_train_group_gradient_cap (DcTrainGroup *self)
{
  return dc_train_wire_gradient_cap (self->plan != NULL ? self->plan->memory.n_params : 0);
}

guint64
_dc_train_group_weights_cap (DcTrainGroup *self)
{
  return dc_train_wire_weights_cap (self->plan != NULL ? self->plan->memory.n_params : 0);
}
