package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/pingd/pingd/hub"
)

// canonicalizeStoredURLs is the data step of the canonical_urls migration:
// rows written before URLs were stored in canonical form (hub.CanonicalURL)
// get that form, so every spelling finds them. Sources whose URLs are one
// URL spelled two ways become one: the oldest (lowest id) stays, the
// others' nodes follow it, their seen entry ids join its own (so nothing
// becomes new again) and their upstream subscriptions move to it unless it
// has one of that kind. HTTP subscriptions whose callbacks (and topics) are
// one spelled two ways become one too: the oldest stays, with its cursor
// and state. A URL that is not valid (rows older than the checks) is left
// as it is.
func canonicalizeStoredURLs(ctx context.Context, tx *txn) error {
	if err := canonicalizeSources(ctx, tx); err != nil {
		return fmt.Errorf("canonical source URLs: %w", err)
	}
	if err := canonicalizeSubscriptions(ctx, tx); err != nil {
		return fmt.Errorf("canonical subscriber addresses: %w", err)
	}
	return nil
}

// canonicalOrSame is raw in canonical form, or raw when it has none.
func canonicalOrSame(raw string) string {
	if c, err := hub.CanonicalURL(raw); err == nil {
		return c
	}
	return raw
}

type storedSource struct {
	id                      int64
	original, current, site string
}

func canonicalizeSources(ctx context.Context, tx *txn) error {
	var all []storedSource
	rows, err := tx.QueryContext(ctx, `SELECT id, original_url, url, site_url FROM sources ORDER BY id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var s storedSource
		if err := rows.Scan(&s.id, &s.original, &s.current, &s.site); err != nil {
			rows.Close()
			return err
		}
		all = append(all, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	keep := map[string]int64{} // canonical original URL → the source kept for it
	var changed []storedSource
	for _, s := range all {
		canon := canonicalOrSame(s.original)
		first, dup := keep[canon]
		if !dup {
			keep[canon] = s.id
			c := storedSource{s.id, canon, canonicalOrSame(s.current), s.site}
			if s.site != "" {
				c.site = canonicalOrSame(s.site)
			}
			if c != s {
				changed = append(changed, c)
			}
			continue
		}
		if err := mergeSource(ctx, tx, s.id, first); err != nil {
			return fmt.Errorf("merge source %d (%s) into %d: %w", s.id, s.original, first, err)
		}
	}
	// The duplicates are gone, so no canonical original URL is taken.
	for _, c := range changed {
		if _, err := tx.ExecContext(ctx, `UPDATE sources SET original_url = $1, url = $2, site_url = $3 WHERE id = $4`,
			c.original, c.current, c.site, c.id); err != nil {
			return fmt.Errorf("source %d: %w", c.id, err)
		}
	}
	return nil
}

// mergeSource moves what refers to source from to source into, and
// deletes from.
func mergeSource(ctx context.Context, tx *txn, from, into int64) error {
	for _, q := range []string{
		`UPDATE nodes SET source_id = $2 WHERE source_id = $1`,
		`INSERT INTO seen (source_id, entry_id, seen_at) SELECT $2, entry_id, seen_at FROM seen WHERE source_id = $1
			ON CONFLICT (source_id, entry_id) DO NOTHING`,
		`UPDATE upstreams SET source_id = $2 WHERE source_id = $1
			AND kind NOT IN (SELECT kind FROM upstreams WHERE source_id = $2)`,
	} {
		if _, err := tx.ExecContext(ctx, q, from, into); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM sources WHERE id = $1`, from)
	return err
}

// canonicalAddress is an HTTP subscriber's address in canonical form: a
// callback URL, or (URL-level protocols) a callback with the escaped topic
// in its fragment, as httpapi writes them.
func canonicalAddress(addr string) string {
	callback, topic, hasTopic := strings.Cut(addr, "#")
	callback = canonicalOrSame(callback)
	if !hasTopic {
		return callback
	}
	if t, err := url.QueryUnescape(topic); err == nil {
		topic = url.QueryEscape(canonicalOrSame(t))
	}
	return callback + "#" + topic
}

func canonicalizeSubscriptions(ctx context.Context, tx *txn) error {
	type sub struct {
		id         int64
		node       int64
		kind, addr string
	}
	var all []sub
	rows, err := tx.QueryContext(ctx, `SELECT id, node_id, kind, address FROM subscriptions WHERE kind <> $1 ORDER BY id`,
		string(hub.KindXMPP))
	if err != nil {
		return err
	}
	for rows.Next() {
		var s sub
		if err := rows.Scan(&s.id, &s.node, &s.kind, &s.addr); err != nil {
			rows.Close()
			return err
		}
		all = append(all, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	type key struct {
		node       int64
		kind, addr string
	}
	seen := map[key]bool{}
	var changed []sub
	for _, s := range all {
		canon := canonicalAddress(s.addr)
		k := key{s.node, s.kind, canon}
		if seen[k] {
			if _, err := tx.ExecContext(ctx, `DELETE FROM subscriptions WHERE id = $1`, s.id); err != nil {
				return fmt.Errorf("subscription %d: %w", s.id, err)
			}
			continue
		}
		seen[k] = true
		if canon != s.addr {
			changed = append(changed, sub{s.id, s.node, s.kind, canon})
		}
	}
	for _, s := range changed {
		if _, err := tx.ExecContext(ctx, `UPDATE subscriptions SET address = $1 WHERE id = $2`, s.addr, s.id); err != nil {
			return fmt.Errorf("subscription %d: %w", s.id, err)
		}
	}
	return nil
}
