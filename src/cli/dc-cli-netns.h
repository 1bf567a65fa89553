/* dc-cli-netns.h: the benches' shaped network between namespaces (bench
 * ring --netns, bench group --netns) and the delay hub that gives it its
 * 1 ms where the kernel has no sch_netem (`daisychain-cli net-hub`).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The one-way delay asked of the shaped network: what `tc netem delay 1ms`
 * on each device's egress gives, so a round trip takes 2 ms. */
#define DC_CLI_NETNS_DELAY_US 1000

typedef struct
{
  char        *what;        /* "bench ring", for messages */
  char        *prefix;      /* of every name made: PREFIX-br, PREFIX-s1, PREFIXh */
  char        *switch_ns;   /* PREFIX-br once made: the bridge's or the hub's */
  GPtrArray   *made;        /* namespaces made (char*), removed in reverse */
  GPtrArray   *ports;       /* the switch's ports (char*), "p0" … */
  GPtrArray   *links;       /* each port's endpoint: "NS DEV", or "DEV" in this namespace */
  gboolean     no_tc;       /* tc is not in PATH: nothing can be shaped */
  gboolean     no_netem;    /* tried on the first link and refused */
  gboolean     no_tbf;
  char        *netem_reason;
  char        *tbf_reason;
  char        *hub_reason;  /* why the hub could not run (then a bridge) */
  gboolean     hub_on;
  guint        hub_delay_us;  /* DC_CLI_NETNS_DELAY_US, or DC_NETNS_HUB_DELAY_US's */
  char        *network;       /* dc_cli_netns_network ()'s, when made up */
  GSubprocess *hub;
  GDataInputStream *hub_out;
} DcCliNetns;

gboolean    dc_cli_netns_begin     (DcCliNetns  *netns,
                                    const char  *what,
                                    const char  *prefix,
                                    GError     **error);
gboolean    dc_cli_netns_add       (DcCliNetns  *netns,
                                    const char  *name,
                                    const char  *link,
                                    const char  *address,
                                    GError     **error);
gboolean    dc_cli_netns_connect   (DcCliNetns  *netns,
                                    GError     **error);
void        dc_cli_netns_remove    (DcCliNetns  *netns);
const char *dc_cli_netns_shaping   (DcCliNetns  *netns);
const char *dc_cli_netns_network   (DcCliNetns  *netns);
char       *dc_cli_netns_note      (DcCliNetns  *netns);
JsonObject *dc_cli_netns_hub_stats (DcCliNetns  *netns);
JsonObject *dc_cli_netns_tbf_stats (DcCliNetns  *netns);
JsonObject *dc_cli_netns_udp_stats (DcCliNetns  *netns);
void        dc_cli_netns_add_json  (DcCliNetns  *netns,
                                    JsonBuilder *builder);

G_END_DECLS
