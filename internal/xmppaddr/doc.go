// Package xmppaddr normalises XMPP addresses given as text to the form
// pingd stores and compares: the bare JID, with the PRECIS profiles and
// IDNA applied (RFC 7622), so that one account spelled several ways is one
// address everywhere.
//
// Its room: Bare, the one normalisation of a JID that arrives as text (a
// GetPingd whitelist request, an admin API path, PINGD_ADMINS). It is a
// room of its own because it needs the XMPP library's address rules,
// which the hub, free of XMPP, may not import, while the whitelist, the
// HTTP API and the configuration all need the same answer.
//
// What it may not touch: anything but addresses — no stanzas, no hub, no
// I/O. It imports no pingd package.
package xmppaddr
