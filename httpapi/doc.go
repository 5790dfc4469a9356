// Package httpapi is pingd's HTTP side: the gorilla/mux router for pings
// (XML-RPC /RPC2, REST, CNWS, WebSub), GetPingd subscriptions and whitelist
// requests, discovery documents, the nodes' own feeds, the admin API,
// health, readiness and metrics.
//
// It turns requests into hub calls and answers in each protocol's own
// format. Every body it reads is size-capped (Config.MaxBodyBytes, 413
// beyond it). It may not touch XMPP (it never imports component) nor the
// database directly: everything goes through the hub.
//
// Layout: router.go builds the router (encoded paths: a node name is one
// percent-encoded path segment; 404 and 405 with Allow) and lists each
// area's routes; every area keeps its handlers in its own file (health.go,
// admin.go, pings.go, rpc.go, changes.go, …). The admin API: admin.go
// (its routes, the rate limit and the bearer token), adminnodes.go
// (nodes, their settings and tokens), adminwhitelist.go, adminstatus.go
// (a node's subscribers and status, the relay targets); json.go holds
// the JSON reading and writing every JSON answer uses.
//
// The subscription dialects that name a URL are rsscloud.go (pleaseNotify, REST and XML-RPC;
// each resource read first through hub.ReadResource; REST answers in XML,
// or JSON by Accept, negotiate.go, as for the REST ping of pings.go),
// cnws.go (POST /cnws) and websub.go (the WebSub hub at /websub); they map
// a URL to its node (pingd's own node URLs included), store the
// subscription through the hub and leave verification and notification to
// the delivery package's senders. What each protocol's documents and forms
// say (names, parsers, encoders, validators) is its own package's:
// internal/websub, internal/rsscloud, internal/cnws, internal/getpingd and
// internal/weblogs; pingd's own node URLs are internal/nodeurl's. httpapi
// does not import delivery: a ping is handed to the hub, and what else
// follows from it (the relay to other ping servers, the look at a homepage
// it names) is done by the hub's ping listeners, which cmd/pingd
// registers; httpapi only marks a ping another pingd relayed
// (weblogs.RelayHeader). XML-RPC methods live in a
// method table (API.HandleRPC) so more can be added beside the ping
// methods. Rate limits (ratelimit.go) are per pinged URL and per host of
// the pinged URL for pings (both in canonical form, hub.CanonicalURL and
// hub.HostKey, so no spelling escapes them), per client IP for the admin
// API, subscription requests and list readers, and per node for GetPingd
// XMPP consumer requests without a token; all answer 429 with Retry-After.
// The client is the TCP peer, or, when the peer is one of
// Config.TrustedProxies, the client its Forwarded or X-Forwarded-For header
// names, read from the right (clientaddr.go); its buckets are per IPv4
// address and per IPv6 /64.
// A subscription that creates an implicit node also takes a token of the
// client IP's bucket of new nodes (subscribedNode), and the hub's bounds
// (implicit nodes in all, subscriptions per callback host) are answered
// like a rate limit: 503 and 429 with Retry-After in each dialect's form.
// outbound.go refuses, before anything is
// stored, sources, topics and callbacks at non-public addresses when
// Config.CheckHost is set (cmd/pingd sets it unless PINGD_ALLOW_PRIVATE);
// the dial-time guard of internal/netguard stays the authority.
//
// GetPingd (getpingd.go): the descriptor page (with the node's newest
// items, read only for open nodes) and XRDS document, and the
// subscription requests, dispatched on their Content-Type to the whitelist
// Service or to the webhook parser (getpingd.ParseWebhookRequest); webhook
// subscriptions are stored pending and verified by the delivery engine.
// Anyone can name any callback, so in every dialect a request about a
// verified subscription only records a pending change
// (hub.RequestSubscription, hub.RequestUnsubscription) that the engine
// applies once the callback confirms it; a repeated CNWS subscribe, which
// nothing can verify, changes nothing.
// The nodes' own feeds (nodefeeds.go): Atom and RSS with strong ETags,
// conditional GET, gzip and RFC 3229 deltas. Whatever reads a whitelist
// node's content over HTTP (its feeds, webhook and WebSub subscriptions)
// checks the bearer token with requireReader.
//
// The status page at "/" (status.go, the view it fills in statusview.go,
// templates/ embedded): server-rendered
// HTML with its CSS inline and a hash-based Content-Security-Policy, no
// JavaScript, nothing loaded from elsewhere. Besides the hub it reads only
// the store's Check and the store package's StatusReport, a fixed number
// of queries per reading with every list capped; one reading serves every
// view of its kind for 5 s, and one runs at a time. "/?admin=1" (admin token as
// Bearer or as the HTTP Basic password) adds addresses, callback URLs,
// error messages and ping origins; secrets and tokens are never shown.
//
// OPML (opml.go, with the codec of internal/opml): GET /opml, the open
// nodes as a subscription list of their /atom feeds, rendered once a
// minute and served like the ping lists (ETag, 304, gzip, nosniff, capped,
// readers limited per client IP); POST /api/opml (admin) makes an open
// node for each feed of a list that no node follows and reports outline
// by outline.
//
// The ping lists (changes.go, archive.go, lists.go; the document and the
// archive hours are internal/weblogs'): changes.xml, shortChanges.xml and
// the hourly archives (01.xml to 24.xml of a UTC day, as seed 003 numbers
// them) list each ping's name and URL as submitted, and an extendedPing's
// feed as rssUrl; they are read from the store at
// most once per interval, one list query at a time, and served from that
// reading with ETag, 304 and gzip; documents are capped in entries and
// bytes, and readers are limited per client IP.
//
// Requests are logged with slog at debug level, without query strings or
// headers, so no token reaches the logs. Read timeouts belong to the
// http.Server that cmd/pingd builds.
package httpapi
