// Package ratelimit keeps token buckets per key, for the limits pingd puts
// on what outsiders make it do (pings, subscription requests, admin
// guesses, pushes to its callbacks), and Lookups (lookups.go): the
// budget, concurrency and deadline of the outbound requests made on
// someone's behalf, counted per request through the look-up's context.
// Its room: the buckets and their memory bound. It knows nothing of HTTP
// or of what the keys mean, and imports no pingd package.
package ratelimit
