// Package whitelist decides who may subscribe to a whitelist node: it
// parses GetPingd whitelist requests (application/getpingd+xmpp+subscribe+xml),
// authorises them with the node's or the admin's bearer token, and maps them
// onto XEP-0060 affiliations in the hub, so the HTTP, XMPP and admin-API
// views of a whitelist are one and the same.
//
// It may not touch HTTP routing or XMPP stanzas; httpapi and component call it.
package whitelist
