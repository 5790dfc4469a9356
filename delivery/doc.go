// Package delivery sends pingd's outbound HTTP notifications durably: GetPingd
// webhooks, WebSub content distribution, rssCloud notify calls and CNWS
// resourceChange posts, and the verification-of-intent requests before them.
//
// Its room: the delivery engine (claims, per-host limits, retries with
// backoff and jitter, ageing, removal and suspension rules), one Sender per
// subscriber kind that sends that protocol's requests and judges their
// answers, and the SSRF-guarded HTTP client. The protocols' documents,
// names and signatures come from internal/getpingd, internal/websub,
// internal/rsscloud and internal/cnws (and internal/weblogs for the ping
// relay), the node's URLs from internal/nodeurl and its feed's description
// from feed.NodeFeedMeta. It may not touch XMPP or inbound HTTP, and it
// reads and writes state only through its own Store (store.go: the few
// methods it calls) and hub.RelayStore.
//
// Why publishing stays cheap as subscribers grow: there is no per-subscriber
// outbox row written on the publish path. Publishing appends each new event
// once to the node's log (the hub's log store, Append). Every HTTP subscription carries
// a cursor, the sequence of the last event it was sent. The engine claims
// subscriptions whose cursor is behind their node's newest sequence
// (Store.ClaimDeliveries, an indexed query with leases so that several
// pingd instances never serve one subscription at once), reads the events
// after the cursor, sends them in one request, and only then advances the
// cursor. A subscription's row changes only when that subscriber is served,
// so a publish costs O(events) writes whatever the number of subscribers, a
// receiver that was down gets everything it missed in order when it comes
// back, and a crash between sending and saving repeats a delivery (at least
// once) rather than losing it.
//
// A request about a verified subscription (a renewal, new settings, an
// unsubscription: hub.SubChange) is verified under a lease of its own,
// beside the subscription's deliveries, which go on with the settings it
// has; the engine applies the change only if the callback confirms it, and
// a refused or unanswered change leaves the subscription as it was.
//
// Nothing a stopping process held stays stuck: a delivery cut off by
// shutdown is given back unchanged (lease released, cursor where it was),
// and what a receiver already answered is saved even after the context
// ended. Leases are short (Config.Lease, 15 s) and Run renews those of
// what it holds every third of one, so a process that died frees its
// subscriptions soon. At start the engine frees the leases held under
// its own Config.Instance (a restart of a process that died) and, when
// Config.Exclusive says it is the store's only user (SQLite), everyone's.
// A save is the lease holder's: the store writes it only while the lease
// is still the one the claim took (hub.DeliveryState.LeaseOwner), so a
// process whose lease ran out cannot overwrite the next holder's state.
//
// What makes fan-out fast (docs/benchmarks.md): claims are large (up to 256
// subscriptions in one query, at most 32 per worker held in memory), a
// claim of a woken node brings the node and its new events with it (read
// in the claim's transaction, Store.ClaimNodeDeliveries; after a publish
// of this process not even read: the hub hands the engine what it
// appended, Engine.Appended, and the claim only checks, with the node's
// last_seq it reads anyway, that those are the events after the
// subscribers' cursor), the body
// for a batch of subscribers is rendered once, workers are a fixed
// pool, and the states of deliveries that finish one shortly after
// another while others still run are saved together in one transaction
// (states.go, Store.SaveDeliveryStates) rather than one commit each; a
// delivery with nothing else running is saved at once. A subscription
// stays leased until its state is saved; a crash in between repeats that
// delivery, as any crash between sending and saving does.
//
// Per-host limits never hold a worker: a claimed subscription whose receiver
// host has no free slot waits in that host's queue in memory, served by the
// worker holding the host's slot; the queue holds as many as the host
// answers in one and a half request timeouts (by its recent answer
// times). Beyond that the
// subscriptions are given back with their next attempt put off until the
// host has served about half its queue, and their node is looked at again
// then, so a slow receiver with many subscriptions cannot hold up the
// others. A request is bounded by Config.Timeout; its lease is renewed
// while it runs, so a delivery is not handed out twice while it runs
// unless renewals fail (then a subscription whose lease may have run out
// is left to be claimed again rather than started).
//
// The engine, one topic a file: sender.go (the contract a subscriber
// kind implements: Sender, its failure Policy, Delivery, Result),
// engine.go (Config, New, wakes, serving one claimed subscription and
// saving its state), claims.go (Run: the claim loop and the worker pool,
// a host's queue served by its slot's holder, leases given back at
// shutdown and taken back at start, postponing for a busy host),
// hostqueue.go (per-host slots, queues and busy delays), retry.go
// (nextAttempt: backoff with jitter within the retry window), verify.go
// (verification of intent and of pending changes), batch.go (one read of
// the log and one rendering per batch), states.go (the state writer) and
// http.go (verification GETs; every request, the relay's too, goes
// through internal/httpout: User-Agent, capped answer, URLs redacted in
// errors). relay.go forwards accepted pings.
//
// The senders, one file each: webhook.go (GetPingd), websub.go (WebSub:
// verification with the lease, denial notices, content in the topic's own
// format, X-Hub-Signature), rsscloud.go (the challenge GET, or the test
// notification, which is also how an xml-rpc registration naming a domain
// is checked, before a registration is active, http-post, XML-RPC and
// SOAP 1.1 notify calls, suspension after three errors in a row) and
// cnws.go (<resourceChange> posts; removal on a false status or an HTTP
// error, ageing when the host cannot be reached). webhook.go's patches
// are also what XMPP subscriptions asking for diffs get: NodePatch, which
// cmd/pingd hands to the component.
package delivery
