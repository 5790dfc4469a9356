// Package hub is the core of pingd: nodes, their item logs, subscriptions of
// every kind, sources and the fan-out decision.
//
// Its room: the domain types (Node, Event, Subscription, Source, Ping) and
// their rules (ValidURL for what pingd fetches and calls, WebLink for the
// links it republishes), the interfaces it needs from the outside (its
// store ports, Stores; Fetcher; FetchEngine; Transport) and the Hub service
// that validates requests, writes through the ports and wakes the
// transports.
//
// What it may not touch: any wire format. The hub knows nothing of XMPP
// stanzas, HTTP requests, XML-RPC or feed syntax; the component, httpapi,
// feed and delivery packages translate between those and the hub. Nothing in
// this package imports another pingd package. The fetch engine is
// hub/fetching, beside it.
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
// same transaction (FetchNews.Kept, LogStore.KeepItems), so a node holds its
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
// it once the callback confirms. What a request, a verification applied or
// refused, or a verification's release does to the subscription is decided
// here, by pure functions (changerules.go: DecideSubscribeRequest and the
// other Decide functions, each giving a SubscriptionDecision); the store
// reads the subscription under its transaction, asks the rule and writes
// the row it decided. Which events a claim of one node reads for its
// subscribers is UsualCursor (deliveryrules.go). A failed delivery's
// retry, ageing and suspension are the delivery side's (package delivery);
// what stays in SQL is what must be decided on the rows themselves: the
// claims' conditions, read through indexes (their rule is DeliveryWork,
// which the store's conformance suite holds the claims to), the fencing of
// leases and a saved cursor never moving back.
//
// What a fetch brings (fetchrules.go) is decided here, by pure functions:
// the outcome of a fetch (OutcomeOf) and whether its representation is
// kept as the source's body (KeepsBody), which entries are new, the baseline,
// the change event, a node's share of new entries and the refetch a ping
// during the fetch causes. The store runs them inside the transaction that
// reads the seen ids and writes the events (the fetch engine's
// ApplyFetch), so the rules are tested without SQL.
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
// The store ports (store.go): one small interface per role (NodeStore,
// LogStore, SourceStore, SubscriptionStore, ReaderStore, AffiliationStore,
// PingStore, MaintenanceStore), each holding only what the hub calls,
// given one by one in Config.Stores; the parts that use the store beside
// the hub (the fetch engine, delivery, the component, httpapi, upstream)
// declare their own.
//
// The Hub is the one door of the core for every adapter. Its use cases are
// split by area into types it embeds, so their methods are the Hub's and
// the adapters still hold one *Hub: AccessUseCases (access.go: admins,
// affiliations, revocations, tokens; configure.go), NodeUseCases
// (nodes.go: creating, finding and deleting nodes, the implicit nodes of
// URLs; items.go: publishing, retracting, purging, reading items;
// nodelog.go, nodesource.go, and the node side of bounds.go) and
// SubscriptionUseCases (subscriptions.go, requests.go, subopts.go,
// subscriptionstate.go, bounces.go, digests.go, and the subscription side
// of bounds.go). None holds the Hub: each has what every area shares (the
// store ports, the log, the clock, waking a node's transports) and, as
// fields of its own, its state and limits (the admins; the node caches;
// the account locks and bounds) and the few ways into the Hub or another
// area it uses (the node area a source's baseline and the fetch engine's
// wake-up; the subscription area the access area, the baseline and
// whether a kind is served), so an area's dependencies are read off its
// type in hub.go. The Hub's own methods are what every area shares or no area owns: hub.go (Config,
// New, registering transports, waking them), pinglisteners.go, pings.go
// (pings and changes naming URLs), baseline.go (a new source's first
// fetch and waiting for it), readresource.go (ReadResource: whether a URL
// can be read, asked before an rssCloud registration), opennodes.go,
// pingarchive.go, fetchengine.go (FetchEngine and what the status page
// reads of it) and run.go (Run: the fetch engine and the maintenance
// loop). Types keep apart so no one of them grows past what one reader
// holds, and internal/archtest bounds them.
//
// The other files, each named for what it holds: the domain types and
// their rules in types.go (errors, Ping, URL validity), nodetypes.go
// (access models, affiliations, node configuration, node names),
// eventtypes.go (events, entries and their size bound),
// subscriptiontypes.go (kinds, states, options, delivery state, pending
// changes) and sourcetypes.go (sources, their fetch state and a fetch's
// outcome); kinds.go (the subscription kinds' registry: item-level,
// verified, HTTP); changerules.go (verified requests and their
// verifications) and deliveryrules.go (what a delivery claim takes, a node
// claim's events), the rules the store runs in its transactions; statusreport.go (the status report's types, which the
// store fills); fetchrules.go (a fetch's outcome and what it brings);
// fetcher.go (Fetcher, Scheduler and a fetch's request and result),
// transport.go (Transport, Observer), resolve.go (SourceResolver),
// relay.go and upstream.go (the ping relay's and the upstream
// subscriptions' types and stores) and pingarchive.go (PingArchive, how
// long pings are kept); extensions.go (a change announcement's extension
// elements added to its entries); slowwait.go (WaitObserver: slow waits
// told to the caller's worker pool); urlcanon.go and weblink.go (URL
// spellings).
//
// Fetching is the engine's (hub/fetching): it claims due sources under
// leases, keeps each origin host's politeness, stores outcomes (those that
// change nothing in batches) and gives back what shutdown cut off. The hub
// talks to it through FetchEngine: a use case that made a source due wakes
// it, and one that learnt of a new source waits for its baseline
// (AwaitFetch); FetchLoad and FetchLimits tell the status page what it
// holds and within what bounds.
package hub
