// Package component is pingd's XMPP side: the XEP-0114 connection to the
// XMPP server (handshake, reconnect with backoff and jitter) and the
// XEP-0060 publish-subscribe and XEP-0030 service discovery answered on the
// component's JID, plus what plain Jabber clients use: chat commands,
// XEP-0050 ad-hoc commands, readable notifications and presence.
//
// It turns stanzas into hub calls and the hub's node logs into pubsub#event
// notifications. It may not touch HTTP, feeds or the database directly
// (it reads logs and cursors only through the store it is given,
// Config.Store), and
// it never imports httpapi.
//
// Three types share the work, and hold one sharedState (component.go)
// for what more than one of them reads or changes: the hub, the log, the
// domain and secret, whether this process leads, the live connection,
// the stanza ids and the stanza budget. None holds a copy of another's
// fields. The Component (component.go) keeps the connection, the
// leadership and the stanza router: it reads each stanza off the stream
// and hands it to the service, runs the request pool whose jobs the
// service carries out, and calls the dispatcher (Wake; on a new
// connection, the probe, the acknowledgements' recorder and the
// multicast look-up; the multicast bounces its pool hands back). The
// dispatcher (dispatcher.go) sends the notifications: its work queue and
// loop, the fan-out, digests, acknowledgement markers and multicast, in
// notify.go, fanout.go, digests.go, acks.go, multicast.go and queries.go;
// deleted nodes' notifications in deletions.go. Its renderer (render.go,
// readable.go, diff.go, budget.go) makes the notification stanzas and
// fits them to the budget; it holds no connection and reads no store.
// The service (service.go) takes every request served over the stream
// off it and answers it: IQ plumbing, disco, the XEP-0060 subscriber and
// publisher use cases, subscription options, presence and errors
// answering notifications; it hands the dispatcher the markers that come
// back and tells multicast bounces apart. The service's areas are types
// of their own, each given only what it uses: nodeAccess (service.go:
// the node look-up and the access checks every area shares),
// ownerRequests (owner.go), subscriptionTargets (targets.go: what a
// chat or ad-hoc subscription names, and the subscription path),
// chatCommands (chat.go) and adhocService (adhoc*.go), which runs the
// chat commands' use cases behind forms. The types with a state of their
// own (ackWindow, pendingQueries, stanzaIDs, the request pool,
// nodeCreation with its per-JID buckets) have files of their own.
//
// What mellium.im/xmpp does and does not do here. The stream, the
// handshake, JIDs, stanza types, the namespaces, data forms (form) and
// the <set/> of a paged answer (paging.Set) are mellium's. The rest is
// pingd's own, for these reasons, measured with BenchmarkRequests and
// BenchmarkFanout (docs/benchmarks.md):
//   - Reading: a stanza is read once into the element tree, which bounds
//     its size and depth, and handed to the request pool. mux would run
//     handlers on the stream's reader, whom no request may hold (pool.go),
//     and each handler would decode its payload again from tokens.
//   - Paging requests: paging's request types cannot say an empty
//     <before/> (the last page) or tell an absent <max/> from <max>0</max>,
//     and paging.Set cannot write an empty page (<count/> alone): those
//     are rsm.go's. paging.Set costs a few microseconds and allocations
//     more per paged answer than writing it by hand, small beside the
//     store reads of the request; it is on no notification.
//   - disco: disco.Info writes features before identities and every child
//     with its own xmlns and end tag: other bytes on the wire for the same
//     answer, so disco.go writes its own.
//   - Notifications (the fan-out) are written as raw bytes: each event is
//     rendered once and copied to every subscriber with only the "to"
//     changed, where an encoder would render it again for each.
//
// Its parts:
//   - component.go, connection.go: the Component, its Run loop (dial,
//     handshake with mellium's component package, serve, reconnect with
//     internal/reconnect's backoff loop), the optional XML trace at debug
//     level, and the one locked, buffered writer every outgoing stanza
//     goes through. quickack_linux.go, quickack_other.go: the socket
//     acknowledges what arrives at once (Linux only), so Prosody's next
//     stanza does not wait for a delayed ACK.
//   - xmlelem.go, request.go, pubsubparse.go, forms.go: incoming stanzas
//     are read into a small element tree with size limits and parsed into
//     requests (request.go: the request and the IQ-level checks;
//     pubsubparse.go: the pubsub and pubsub#owner payloads); every IQ get
//     or set gets exactly one answer, and nothing a client sends can end
//     the stream (the parsers are fuzzed). errors.go: the namespaces and
//     the stanza errors answers carry. forms.go: XEP-0004 data forms are
//     mellium's form package, both ways.
//   - pool.go: requests are carried out by a pool of eight workers, not
//     by the stream's reader (one more in place of each that waits for a
//     slow fetch, up to 64); the reader never waits for it: each bare JID
//     has a share of the pending requests, and the pool a bound, beyond
//     which a request is refused at once; workers serve the senders in
//     turn. Requests about one node (and one sender's chat commands) keep
//     their order, and publishes of one sender to one node that wait
//     together become one append. Every IQ get and set is answered exactly
//     once; what an answer announces (the newest item to a new
//     subscription) follows it (afterAnswer).
//   - limits.go: each JID's share: requests per second (IQs, chat
//     commands, presence requests), pending requests, and page look-ups
//     (internal/ratelimit's Lookups: every HTTP request counted per JID,
//     checked before the first, few at once, a deadline), with the
//     refusals (resource-constraint, a rate-limited "busy" chat answer).
//   - service.go: the service type, and the IQ plumbing: an IQ taken off
//     the stream, handed to the pool, carried out (execute) and answered,
//     and the access checks every use case shares. The XEP-0030 and XEP-0060 use cases are
//     carried out through the hub's methods so the hub's rules
//     (whitelists, revocation, item limits) hold for XMPP too: disco.go
//     (XEP-0030 disco#info and disco#items, the features pingd
//     implements), subscriber.go (subscribe, unsubscribe, one's own
//     subscriptions and affiliations, items retrieval, and the item
//     element every notification writes), publisher.go (publish and
//     retract, the payload limit), owner.go (create, configure, delete,
//     purge, and the owner's subscriptions and affiliations management).
//     Subscription options are in subopts.go; clientformat.go asks the
//     client behind a plain subscribe (disco#info) whether it handles
//     Atom events, and gives one that says it does not plain messages.
//   - rsm.go: XEP-0059 result set management on items retrieval, and on
//     the service's disco#items, which reads one page of the nodes from
//     the store (hub.NodePage), never the whole list. Children of
//     <pubsub/> in namespaces pingd does not handle are ignored. The
//     <set/> of an answer with items is mellium's paging.Set.
//   - atom.go: what an owner publishes is an Atom entry, completed to the
//     entry the node's feeds show through Config.CompleteEntry (the feed
//     package's, given by cmd/pingd).
//   - dispatcher.go: the dispatcher type. notify.go: the dispatch loop.
//     One cursor per node (Node.XMPPSeq): after each Wake and each
//     (re)connection it reads the node's log after the cursor; fanout.go
//     (writeEvents) has each event rendered once per variant (format,
//     body, diff), writes it to every subscriber with only the "to"
//     changed and flushes; render.go holds the renderer and the
//     notification stanzas (event, delete, an item's checked payload, and
//     the plain messages that tell a reader of plain messages its node was
//     deleted or its subscription ended: a revoke event carries the
//     subscription's message type for that, hub.Event.PlainType).
//     deletions.go: a deleted node's delete notifications, from the
//     hub.NodeDeletion the store records with the deletion, sent like a
//     batch of the log and forgotten once acknowledged. stanzaids.go: a
//     notification's id names its node, so an error that answers it can
//     be traced back.
//   - acks.go, ackwindow.go: the cursor advances when the server has
//     processed the write: an IQ the component sends itself (a marker)
//     comes back through the server after everything written before it;
//     what was not acknowledged when a connection ends is written again
//     by the next. acks.go holds the markers, ackwindow.go the ackWindow,
//     one connection's batches awaiting acknowledgement.
//   - multicast.go: XEP-0033. After each connection the component looks
//     for the server's multicast service (Config.Multicast) and, when
//     there is one, sends a notification to the server's own users as one
//     stanza per batch of addresses; a refused one is sent again one by
//     one. queries.go: pingd's own IQs (the multicast service's
//     discovery, a subscribing client's features) and the answers they
//     wait for.
//   - leader.go: several pingd processes on one database. Only the holder
//     of a lease (the store's leader lock, given as Config.Leader) sends
//     notifications, and sweeps for nodes other processes appended to;
//     against Prosody only it connects, the others stand by and take over
//     when it dies; against ejabberd (Config.Shared) every process
//     connects and answers requests.
//   - chat.go, targets.go: the chat commands (help, nodes, list,
//     subscribe, unsubscribe, last); a subscription may name a node or a
//     feed's or page's URL (Config.Resolver, Config.OpenSources; a page
//     is looked at within its JID's look-up bounds, limits.go).
//   - opensources.go: nodeCreation, who may have a node made for a feed no node follows
//     by naming its URL (anyone, the users of Config.LocalDomains, or
//     only admins), at most Config.NodesPerHour per JID, and only for
//     public addresses (Config.CheckHost).
//   - adhoc.go, adhocuser.go, adhocowner.go: the same as XEP-0050 ad-hoc
//     commands with XEP-0004 forms, plus owner commands for PINGD_ADMINS;
//     stateless between stages. adhoc.go: the command table, parsing,
//     disco and the stages; adhocuser.go the users' commands;
//     adhocowner.go the owner commands.
//   - subopts.go, readable.go: XEP-0060 subscription options (the format,
//     pubsub#include_body, the message type, x-pingd#diff; registered
//     fields pingd does not offer are taken only when they ask for what it
//     does anyway), the plain messages of readers (the message format: a
//     readable body and an XEP-0066 link, no pubsub#event; chat and ad-hoc
//     subscriptions get them), the body added to pubsub events that ask
//     for one, and bursts: the items of one append sent to readers as one
//     message.
//   - diff.go: the x-pingd#diff option. A subscription asking for diffs
//     gets, beside each pubsub event (and digest), the RFC 7351 patch of
//     the node's Atom document GetPingd webhooks get (Config.Patch, given
//     by cmd/pingd), as the text of a GetPingd XMPP <Diff/> element; the
//     dispatcher makes each event's patch once, and only when some
//     subscription asks for it.
//   - digests.go: subscriptions asking for digests (XEP-0060
//     pubsub#digest) are left out of the fan-out and get, on the
//     dispatcher, one notification per interval with their items since
//     their own cursor, recorded once the server took it.
//   - bounces.go: errors answering notifications (XEP-0060 §12.3) are
//     matched to their subscription by the notification's id and sender;
//     the hub ends the subscription or counts the bounce.
//   - presence.go: answers to presence subscriptions and probes.
//   - budget.go: the stanza budget. No stanza written is larger: an
//     event goes without its patch, body or payload, a digest covers
//     fewer events, a burst is split by size, items retrieval and
//     disco#items are cut with an XEP-0059 <set/>, any other answer
//     becomes resource-constraint. The budget comes down when the server
//     ends the stream right after a large stanza (connection.go,
//     refusedStanza), so a server with a lower limit costs one
//     reconnection, not a loop.
package component
