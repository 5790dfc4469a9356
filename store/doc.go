// Package store keeps pingd's state: it implements hub.Store on SQLite (the
// embedded default, modernc.org/sqlite, no cgo) and on PostgreSQL, with an
// embedded schema and numbered migrations recorded in the database.
//
// It may not make decisions that belong to the hub beyond what the
// hub.Store contract states (which entries are new for a source, how an
// item replaces another); it never talks to the network.
package store
