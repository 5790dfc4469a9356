// Package store keeps pingd's state: it implements the store ports its
// users declare (the hub's, hub.Stores, the fetch engine's, delivery's,
// the component's, httpapi's, upstream's) on SQLite (the embedded default,
// modernc.org/sqlite, no cgo) and on PostgreSQL, with an embedded schema
// and numbered migrations recorded in the database. Store is all of them
// in one value; HubStores hands it to the hub port by port.
//
// It may not make decisions that belong to the hub: where a write follows
// a rule (what a verified request or its verification does, what a fetch
// brings, which events a node claim reads), the store reads the rows under
// its transaction, calls the hub's pure function and writes what it
// decided (changes.go with hub/changerules.go, ApplyFetch with
// hub/fetchrules.go, ClaimNodeDeliveries with hub.UsualCursor), so
// atomicity is the store's and the rule the hub's. What is left in SQL is
// what must be decided on the rows themselves, in one statement: what has
// work for a claim (through the indexes; a delivery claim's rule is
// hub.DeliveryWork, and storetest holds the claim to it), the fencing of leases, a saved
// delivery cursor never moving back (GREATEST), an item replacing another,
// and, in ApplyFetch and the unchanged fetches, which entry ids are seen
// and a ping that came during a fetch. It never talks to the network.
//
// One implementation serves both backends through database/sql; the SQL is
// written once with $n placeholders and the differences live in a small
// dialect (row locks, time encoding). The layout:
//
//   - Open picks the backend from the DSN, connects and migrates
//     (migrations/<backend>/NNNN_name.sql, one transaction each, recorded
//     in schema_migrations; a newer recorded version is refused with
//     hub.ErrSchemaTooNew). An SQLite migration that rebuilds a table
//     others reference starts with "-- pingd: foreign keys off" and runs
//     so, its references checked before it commits (migrate.go). Work SQL
//     cannot do is a Go step run in its migration's transaction
//     (dataMigrations, keyed by the name without its number): the
//     canonical_urls migration rewrites stored URLs in hub.CanonicalURL's
//     form, merging rows that were one URL spelled several ways
//     (canonical.go).
//   - A node's log is the events table (node_id, seq); the items table
//     names the current item of each item id, so replacing, retracting,
//     purging and max_items touch only that table. Publishing writes the
//     node row, the events and the items, never a row per subscriber:
//     subscribers keep cursors into the log (hub's delivery model); a
//     baseline's kept items (keepTx) move the cursors at the log's end
//     past them, and saved cursors only move forward. Each
//     append drops the events it moves out of the node's log window
//     (hub.LogWindow) unless they are current items; Prune takes the rest.
//   - The seen table remembers the entry ids of a source, keyed by the
//     source so a source that moves keeps them, each with the time of the
//     latest fetch that showed it; ids a source stopped showing long
//     before its latest fetch are forgotten (ForgetSeenEntries), and so
//     are, when a fetch adds ids, those it did not show beyond the
//     hub.HiddenSeenKept shown last: the feed's own window (ApplyFetch).
//     Kept that few, a source's ids are one row, one compressed list
//     (seenlist.go), read and written whole by ApplyFetch under the
//     source's row lock; the row's span_seconds lets ForgetSeenEntries
//     read only the lists with ids old enough to forget.
//   - A request about a verified HTTP subscription (changes.go) is kept in
//     that subscription's change_* columns as its pending change, one at a
//     time, and applied or refused by its change_id in one transaction, so
//     a verification answered after a newer request came in decides
//     nothing; what each does is the hub's Decide rule, the row read
//     (locked on PostgreSQL) and written in that transaction. Its
//     verification is leased apart from the deliveries
//     (change_lease_*), found through subscriptions_changing.
//   - The delivery columns of subscriptions (cursor, errors, retry time)
//     are the HTTP kinds'. An XMPP subscription's own state, its digests'
//     cursor and due time and its notifications' bounces, is in
//     xmpp_subscription_state (xmpp.go; one row per XMPP subscription,
//     deleted with it), read into the same hub.DeliveryState fields; the
//     delivery claims do not join it.
//   - A source's last body is in source_bodies (one row per source that
//     has one, deleted with it), not in the sources row: SQLite rewrites a
//     whole record, overflow pages and all, on any UPDATE, and the row is
//     updated by every claim, unchanged poll and release. Only ApplyFetch
//     of a changed representation writes it; Source reads it (a LEFT
//     JOIN) and SourceBody alone (a fetch merging an RFC 3229 delta, a
//     node taking its source's current entries); the claims, the lists of
//     sources and the status never. Which sources have one is the hub's
//     rule (hub.KeepsBody: a changed outcome with no body deletes the
//     row). It is stored compressed with zstd
//     (bodies.go), its encoding column saying so; rows from before
//     (an empty encoding) read as they are until their source next changes.
//   - An item event's text (its item id, title, summary, link, updated
//     time and payload) is stored packed in one zstd frame, with a
//     dictionary of Atom entry markup, in the payload column (eventtext.go;
//     the row's encoding says so), since the plain-text copies repeat the
//     payload's text. It is unpacked once per row read (scanEvent), so
//     every reader gets the event as it was appended; rows from before
//     (an empty encoding), and events other than items, read as they are.
//   - Unchanged fetches (unchangedfetches.go): the outcomes of fetches
//     that changed nothing are written many at once, one UPDATE … FROM
//     (VALUES …) per 128 on PostgreSQL and a prepared statement per row
//     in SQLite's one transaction, setting only the fetch state (never the
//     body) and deciding a ping that came during the fetch in the
//     statement itself.
//   - Claims (sources to fetch, subscriptions to deliver) are leases in the
//     rows themselves. On PostgreSQL they are taken with FOR UPDATE SKIP
//     LOCKED, so several pingd processes can share one database; nothing
//     relies on an in-process lock. The holder's writes (a delivery's
//     state, a fetch's outcome, an unchanged fetch) are fenced: they
//     match the row's lease_owner as well as its id, so a process whose
//     lease ran out and was taken by another writes nothing
//     (hub.ErrLeaseLost), and a delivery cursor never moves back
//     (GREATEST; SQLite's MAX). SQLite runs its writes through one
//     connection whose transactions begin IMMEDIATE, so writers queue
//     rather than fail, and reads use separate read-only connections (WAL).
//   - Check, which /healthz asks, runs on a connection of its own on both
//     backends, outside the read pool: a crowd of readers holding every
//     pooled connection cannot make a health probe time out.
//   - Leader locks (leader.go) let one of several processes do what only
//     one may: on PostgreSQL a session-level advisory lock on a connection
//     outside the pool, so the holder's death frees it at once; on SQLite
//     a flock on a file beside the database, which also keeps a second
//     pingd process off the file.
//   - Wake-ups (wakeups.go) tell the other processes on one PostgreSQL
//     database, with LISTEN/NOTIFY, that a node has new work; an
//     optimisation over their one-second polls, nothing on SQLite. The
//     listening session is kept up by internal/reconnect's loop.
//   - Unused state (unused.go): implicit nodes without subscriptions and
//     sources without nodes carry a mark of since when; DeleteUnused
//     marks, clears marks of rows in use again and deletes in batches,
//     each DELETE checking "unused" on the row itself, and storing a
//     subscription (a node) clears its node's (source's) mark in the
//     same transaction, so concurrent processes never delete what is
//     being used.
//   - Each subscription keeps its callback's host (callback_host,
//     hub.CallbackHost, indexed) so the subscriptions of one callback
//     host are counted from the index (callbackhosts.go), and an XMPP
//     account's subscriptions from the index on bare_jid
//     (CountXMPPSubscriptions, for the hub's bounds on one account).
//   - What anyone may ask for lists of nodes reads a page or a JID's rows,
//     never a whole table: NodesPage pages through the unique index on
//     the names (WHERE name > $after ... LIMIT), and JIDAffiliations reads
//     one JID's affiliations by the index affiliations_jid.
//   - Copy (copy.go, with the row conversion in copyrows.go) moves an
//     installation from SQLite to PostgreSQL in one read snapshot and one
//     write transaction, checking row counts (pingd migrate-db).
//   - Prepared statements (prepared.go): on SQLite every query text is
//     prepared once per pool and kept, and bound to write transactions
//     once each; IN lists are padded to powers of two so the texts stay
//     few. PostgreSQL relies on pgx's per-connection statement cache.
//   - Group commit (groupcommit.go): on SQLite the write transactions
//     waiting for the one write connection are committed together, each
//     in a savepoint of its own, so one failing caller changes nothing
//     and the others' writes commit once; to each caller it is its own
//     transaction. Hot single-statement writes (the XMPP cursor, delivery
//     state, pings' due times) go through it too. A transaction that
//     finds the connection idle and nothing queued runs alone on its
//     caller's goroutine. Grouped statements run detached from their
//     callers' contexts (checked between statements instead), since
//     SQLite rolls back a whole transaction when a writing statement in
//     it is interrupted; a group whose transaction is lost anyway runs
//     its callers again one by one.
//
// Every statement runs under Options.QueryTimeout, with one exception: the
// one-row UPDATEs by key that SaveDeliveryStates (deliverystates.go) runs
// in a loop inside SQLite's write transaction are not watched one by one
// (the driver starts a goroutine per watched statement, about a fifth of
// such a statement's cost); the loop checks the deadline between rows.
// Times are stored to the microsecond in UTC (SQLite: fixed-width text
// that sorts as time; zero times are NULL).
//
// The conformance test every backend passes is store/storetest.
package store
