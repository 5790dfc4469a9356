// Package hub is the core of pingd: nodes, their item logs, subscriptions of
// every kind, sources and the fan-out decision.
//
// Its room: the domain types (Node, Event, Subscription, Source, Ping) and
// their rules (ValidURL for what pingd fetches and calls, WebLink for the
// links it republishes), the interfaces it needs from the outside (Store,
// Fetcher, Transport) and the Hub service that validates requests, writes
// through the Store and wakes the transports.
//
// What it may not touch: any wire format. The hub knows nothing of XMPP
// stanzas, HTTP requests, XML-RPC or feed syntax; the component, httpapi,
// feed and delivery packages translate between those and the hub. Nothing in
// this package imports another pingd package.
//
// The delivery model: publishing appends events to the node's log with
// increasing sequence numbers, one write per event whatever the number of
// subscribers. XMPP delivery keeps one cursor per node (the component writes
// every stanza into one stream); HTTP subscriptions keep one cursor each and
// advance it only when their receiver accepted the change, and so do XMPP
// subscriptions that ask for digests (digests.go). Publishing is therefore
// O(events), and a subscriber's state changes only when it is served.
// A feed's baseline is appended as items behind the cursors: the store
// moves every cursor that stood at the end of the log past them in the
// same transaction (FetchNews.Kept, Store.KeepItems), so a node holds its
// feed's entries from the first fetch and no one is told of them; cursors
// never move back.
// The log keeps a node's newest LogWindow (1,000) events and its current
// items; a subscriber further behind skips ahead, and one fetch publishes
// at most a node's max_items new entries, so no feed grows the log without
// bound.
//
// XMPP readers (bounces.go, digests.go, subopts.go): a notification that
// bounces ends or counts against its subscription; a new subscription is
// sent the node's newest item (SendLastPublished).
//
// URLs have one spelling (urlcanon.go, CanonicalURL): sources, node names
// derived from URLs, look-ups and per-host keys (HostKey) use the canonical
// form, so a URL or host written several ways counts once everywhere. The
// adapters canonicalise what they key on themselves (rate limits,
// callbacks); the hub canonicalises every URL that reaches it.
//
// Subscribers that verify their requests (webhooks, WebSub, rssCloud)
// change a verified subscription only through a verified request:
// RequestSubscription and RequestUnsubscription store it as the
// subscription's pending change (SubChange), and the delivery side applies
// it once the callback confirms.
//
// What a fetch brings (fetchrules.go) is decided here, by pure functions:
// which entries are new, the baseline, the change event, a node's share of
// new entries and the refetch a ping during the fetch causes. The store
// runs them inside the transaction that reads the seen ids and writes the
// events (Store.ApplyFetch), so the rules are tested without SQL.
//
// Ping listeners (pinglisteners.go) hear of every recorded ping: the relay
// to other ping servers and the homepage look-ups are listeners, so what a
// ping sets off is registered in one place (cmd/pingd), not in the entry
// points.
//
// A node's configuration changes only through ConfigureNode (configure.go),
// whoever asks: a node made whitelist-only loses the XMPP subscriptions of
// those who may no longer read it there, so the XMPP form, the ad-hoc
// command and the admin API cannot differ.
//
// What strangers make pingd keep is bounded (bounds.go): implicit nodes
// are capped (Config.MaxImplicitNodes), an adapter can charge each
// creation to its client (NodeForURLCreating), and the maintenance loop
// deletes implicit nodes unused for UnusedNodeGrace and sources no node
// follows (DeleteUnused). One XMPP account's subscriptions are bounded too,
// all its resources together (Config.MaxAccountSubscriptions) and on one
// node (Config.MaxNodeResources), in Subscribe, which every way of
// subscribing goes through.
//
// The Hub is the one door of the core for every adapter, so its 56
// exported methods are spread over files by topic rather than over several
// types: hub.go (Config, New, registering transports, waking them),
// access.go (admins, affiliations, revocations, tokens), nodes.go
// (creating, finding and deleting nodes, the implicit nodes of URLs),
// items.go (publishing, retracting, purging, reading items),
// subscriptions.go (subscribing, granting, the last published item),
// baseline.go (a new source's first fetch and waiting for it),
// readresource.go (ReadResource: whether a URL can be read, asked before
// an rssCloud registration), pings.go
// (pings and changes naming URLs) and run.go (a fetch and its outcome,
// the maintenance loop). The other files, each named for what it holds: the domain
// types and their rules in types.go (errors, Ping, URL validity),
// nodetypes.go (access models, affiliations, node configuration, node
// names), eventtypes.go (events, entries and their size bound),
// subscriptiontypes.go (kinds, states, options, delivery state, pending
// changes) and sourcetypes.go (sources, their fetch state and a fetch's
// outcome); the interfaces store.go (Store), fetcher.go (Fetcher, Scheduler and a fetch's request
// and result), transport.go (Transport, Observer), resolve.go
// (SourceResolver), relay.go and upstream.go (the ping relay's and the
// upstream subscriptions' types and stores) and pingarchive.go
// (PingArchive, how long pings are kept); requests.go (verified
// subscription requests: RequestSubscription, RequestUnsubscription);
// subscriptionstate.go (SetSubscriptionState); nodelog.go (EventsAfter,
// for deltas of the nodes' own feeds); nodesource.go (SetNodeSourceURL);
// bounds.go (what strangers may make pingd keep);
// extensions.go (a change
// announcement's extension elements added to its entries); opennodes.go
// (the OPML list); statusreport.go (the status report's types, which
// the store fills); slowwait.go (WaitObserver: slow waits told to the
// caller's worker pool); urlcanon.go and weblink.go (URL spellings).
//
// Fetches are claimed with leases; a fetch cut off by shutdown gives its
// source back, due at once, and with Config.Exclusive (one process per
// store) Run takes back the leases a killed process left.
//
// The fetch loop (fetchloop.go) claims due sources in batches and hands
// each to its origin host (fetchhosts.go): a worker is taken only when the
// host may be fetched now (Config.FetchesPerHost at once,
// Config.FetchHostSpacing between two starts, a pause after a 429 or 503
// that holds its other sources too), so a slow host holds no worker, and
// what a busy host cannot start soon is given back due later at its pace.
// Outcomes that change nothing but the fetch state (a 304, the same body,
// an error, a source given back) are stored in batches by the unchanged
// writer (unchangedwriter.go, Store.ApplyUnchangedFetches), flushed at
// shutdown; FetchLoad and FetchLimits tell the status page what the loop
// holds and within what bounds.
package hub
