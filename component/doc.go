// Package component is pingd's XMPP side: the XEP-0114 connection to the
// XMPP server (handshake, reconnect with backoff and jitter) and the
// XEP-0060 publish-subscribe and XEP-0030 service discovery answered on the
// component's JID, plus chat commands.
//
// It turns stanzas into hub calls and the hub's node logs into pubsub#event
// notifications. It may not touch HTTP, feeds or the database directly
// (it reads logs and cursors only through hub.Store given by the hub), and
// it never imports httpapi.
package component
