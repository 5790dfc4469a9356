// Package ratelimit keeps token buckets per key, for the limits pingd puts
// on what outsiders make it do (pings, subscription requests, admin
// guesses, pushes to its callbacks). Its room: the buckets and their
// memory bound. It knows nothing of HTTP or of what the keys mean, and
// imports no pingd package.
package ratelimit
