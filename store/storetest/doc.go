// Package storetest is the conformance test of store.Store: one test body,
// Run, that every backend runs against a fresh database of its own, so
// SQLite and PostgreSQL are held to the same hub.Store contract.
//
// It only calls the Store interface; it never reaches into a backend's
// tables, and it has no place outside tests.
package storetest
