// Package reconnect keeps a long-lived session up: it runs the session
// again and again until its context ends, waiting between two runs with
// exponential backoff and jitter (cenkalti/backoff), and starts the
// backoff from the beginning again after a session that stayed up a while.
//
// Its room: Loop and the Policy it waits by. The XMPP component's
// connection and the PostgreSQL wake-up listener both use it; it is a room
// of its own so that the two share one loop instead of two copies that
// drift.
//
// What it may not touch: what a session is. It never dials, logs or
// inspects errors itself: the session says whether it got up, and the
// caller's retry function logs why it ended. It imports no pingd package.
package reconnect
