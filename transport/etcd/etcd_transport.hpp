// The lease transport backed by etcd v3 (its JSON gateway, etcd 3.4 API).
//
// The same typed interface as the Kubernetes backend; the mapping:
//   key    <prefix>/<namespace>/<name>, value JSON {holderIdentity,
//          leaseDurationSeconds, acquireTime}, bound to the transport's
//          session lease of TTL leaseDurationSeconds (one etcd lease per
//          transport and TTL for all its keys: etcd_session.hpp);
//   term   the key's create_revision (strictly increasing in the cluster),
//          reported as spec.leaseTransitions; resource_version is mod_revision;
//   GET    /v3/kv/range, then /v3/lease/timetolive of the key's lease
//          (lease::ttl_seconds), or a reading of that etcd lease one of
//          the transport's workers took and that still serves, with its
//          age (lease::ttl_age; etcd_ttl_readings.hpp); no key: not_found;
//   create a keepalive of the session lease (a grant when there is none or
//          it is gone) + /v3/kv/txn (create_revision == 0, then put with
//          the session lease); key present: already_exists;
//   update a renew (same holder and term): /v3/kv/range (the key still has
//          this create_revision) + a keepalive of the key's lease sent
//          during the renew, or the latest one sent at most
//          lease::renew_max_age before it (lease::renewed_age), TTL > 0, else
//          not_found / conflict; a release (holder ""): /v3/kv/txn putting
//          the released record on the key (same lease, if create_revision
//          is unchanged; no revoke: the session lease holds other keys; an
//          untaken one is reaped a TTL later: etcd_session.hpp); a new term
//          on a released record or one naming the same holder (the elector
//          re-taking its own ended term): delete (if
//          mod_revision unchanged) + create; anything else: conflict.
//   batches  reads, creates and renews that queued up in the transport
//          (transport_pool.hpp) go up to 128 at a time: reads and renews as
//          ONE /v3/kv/txn of ranges (each key's range then judged, and each
//          renew's keepalive ridden or sent, as above); creates as ONE txn
//          comparing every key absent and putting them all (all or none;
//          not all absent: each alone, as above).
//   events are not stored (post_event answers true).
//   watch  one stream per namespace, shared by every subscriber of the
//          transport in it: POST /v3/watch of <prefix>/<namespace>/ with
//          its range_end (streamed, one JSON message per line) from the
//          revision after the last one delivered; a PUT event is a record
//          (parsed as get_lease does), a DELETE (revoke, expired TTL) is
//          `deleted`, each to the subscribers of its key; no revision to
//          resume from, or a compacted one: every key of the namespace is
//          read (one range) and each subscriber told what changed for its
//          key. A subscriber joining a running stream is told its key's
//          state at once. The loop (thread, backoff, up/down to every
//          subscriber, idle) is lease_watch_loop's; a stream quiet for
//          idle_timeout (renews write nothing) reads the keys again and
//          watches on, without going down.
// The pieces: etcd_wire.hpp (the gateway's answers and watch lines parsed),
// etcd_client.hpp (endpoints, failover, auth, the mapping above),
// etcd_watch.hpp (the watch), etcd_transport.cpp (the actor).
// Expiry is judged by etcd (lease TTL), so spawn_etcd_backend returns the
// transport with etcd's evidence (transport/etcd/etcd_evidence.hpp) (docs/safety.md),
// and names requests by their keys.
#pragma once

#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "transport/etcd/etcd_watch.hpp"
#include "transport/etcd/etcd_wire.hpp"
