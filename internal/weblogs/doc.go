// Package weblogs is the vocabulary of weblogs.com's ping interface (seed
// 003, RSS Feed State): the weblogUpdates XML-RPC methods pingd takes
// (httpapi) and relays to other ping servers (delivery), and the change
// lists it serves (changes.xml, shortChanges.xml, the hourly archives).
//
// Its room: the method names, the {flerror, message} answer (Answer, and
// Refused for reading another server's), MarshalPing (the call pingd
// relays), the limits of a ping's weblog name and of extendedPing's tags
// (ParseTags), the change list document's parts (changes.go: its start
// tag, one <weblog> per ping, the end, and the size bounds the lists are
// capped with) and the seed's naming of archive hours (ArchiveHour, 01 to
// 24 of a UTC day).
//
// It is a room of its own, as mellium gives each XEP its package, so that
// the HTTP side and delivery share one definition of the protocol without
// importing each other. Which pings a list holds, how long a reading
// serves and how documents are cached stay httpapi's. It does no I/O and
// imports no pingd package but hub (for its error kinds) and
// internal/xmlrpc.
package weblogs
