// Package httpapi is pingd's HTTP side: it turns requests into hub calls
// and answers in each protocol's own format. It may not touch XMPP (it
// never imports component) nor the store package: what it reads of the
// store itself (the health check, the status report, the ping archive,
// upstream subscriptions, the relay queue) it declares as small interfaces
// and is given in a handler's config.
//
// One handler type per protocol or area, each built from its own config
// with only the dependencies and limits it uses; its dependencies on the
// hub are small interfaces declared beside it, listing the *hub.Hub
// methods it calls:
//
//   - Pings (pings.go): weblogUpdates.ping, extendedPing and rssCloud.ping
//     over XML-RPC, the REST ping (POST /ping) and the HTTP GET pings;
//   - RPC (rpc.go, soap.go): POST /RPC2, the XML-RPC method table the
//     areas add their methods to, and rssCloud's SOAP interface;
//   - RSSCloud (rsscloud.go): pleaseNotify over REST, XML-RPC and SOAP;
//   - CNWS (cnws.go): POST /cnws, subscribe and resourceChange;
//   - WebSub (websub.go): the WebSub hub at POST /websub;
//   - GetPingd (getpingd.go): the descriptors, XRDS documents and the
//     subscription requests (webhooks, XMPP consumer requests);
//   - Admin (admin*.go): the admin API under /api/;
//   - Lists (listsarea.go, changes.go, archive.go, lists.go, opml.go): changes.xml,
//     shortChanges.xml, the hourly archives, the OPML list and its import;
//   - Pages (pages.go, status.go, statusview.go, nodefeeds.go, health.go):
//     the status page and GET /api/status, the nodes' own Atom and RSS
//     feeds, /healthz and /readyz.
//
// Router (router.go) mounts them on gorilla/mux (encoded paths: a node
// name is one percent-encoded path segment; 404 and 405 with Allow),
// finds each request's client (clientaddr.go: the TCP peer, or what a
// trusted proxy's forwarding headers name), marks pings another pingd
// relayed (weblogs.RelayHeader) and logs requests at debug level without
// query strings or headers. The limits several areas share are one value
// each, so no dialect escapes them: PingLimits (per pinged URL and per
// host, canonical), SubscribeLimits (per client, and its new implicit
// nodes) and the AdminGate (per client, and the admin token). Every
// body read is capped (Site.MaxBodyBytes, 413 beyond it); checkOutbound
// (outbound.go) refuses early the URLs at non-public addresses that pingd
// would fetch or call back, the dial-time guard of internal/netguard
// staying the authority.
//
// What each protocol's documents say (names, parsers, encoders) is its
// own vocabulary package's: internal/weblogs, internal/rsscloud,
// internal/cnws, internal/websub, internal/getpingd; pingd's own node
// URLs are internal/nodeurl's. httpapi imports neither delivery nor
// upstream: what a ping sets off beyond the hub (the relay, the homepage
// look-ups) are ping listeners cmd/pingd registers, and subscriptions are
// stored through the hub for the delivery engine to verify and serve.
package httpapi
