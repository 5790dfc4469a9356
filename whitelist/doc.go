// Package whitelist decides who may subscribe to a whitelist node: it
// parses GetPingd whitelist requests (application/getpingd+xmpp+subscribe+xml),
// authorises them with the node's or the admin's bearer token, and maps them
// onto XEP-0060 affiliations in the hub, so the HTTP, XMPP and admin-API
// views of a whitelist are one and the same.
//
// Its room: ParseConsumerRequest (the request grammar is
// internal/getpingd's, shared with webhook requests; here JIDs are
// normalised with the PRECIS profiles and reduced to bare JIDs), and the
// Service (Add, Remove, List, Apply) over the hub, which answers with
// getpingd's answer documents. Add makes a JID a member
// only with a token (the node's or the admin's), which a whitelist node
// requires; on an open node a request without one records nothing and only
// confirms that the JID may subscribe, so strangers cannot enrol themselves
// for a later switch to the whitelist model. Remove always needs a token
// and also ends the JID's XMPP subscriptions through the hub's revoke
// event. Its errors (ErrMalformed, ErrTooLarge, ErrBadJID,
// ErrUnauthorized, and the hub's ErrNotFound) are what the HTTP layer maps
// to status codes.
//
// It may not touch HTTP routing or XMPP stanzas; httpapi and component call
// it. It changes state only through the hub, never the store directly.
package whitelist
