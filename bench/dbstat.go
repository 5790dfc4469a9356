package bench

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
)

// dbObjectBytes is one table's or index's share of a SQLite file.
type dbObjectBytes struct {
	Name  string
	Table string // the table it is or indexes
	Bytes int64
}

// sourceTables are a followed source's own tables: its fetch state, its
// last body and its seen entry ids (the node's log, events and items, is
// the node's, as large as its max_items asks).
var sourceTables = []string{"sources", "source_bodies", "seen"}

// sourceTableBytes sums the objects of sourceTables, indexes included.
func sourceTableBytes(objects []dbObjectBytes) int64 {
	var n int64
	for _, o := range objects {
		if slices.Contains(sourceTables, o.Table) {
			n += o.Bytes
		}
	}
	return n
}

// sqliteObjectBytes reads, from SQLite's dbstat table, the bytes of the
// pages each table and index of the database at path takes, largest
// first, and the free pages' as "(free pages)": what a database per
// source is made of.
func sqliteObjectBytes(ctx context.Context, path string) ([]dbObjectBytes, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []dbObjectBytes
	rows, err := db.QueryContext(ctx, `SELECT d.name, COALESCE(m.tbl_name, d.name), SUM(d.pgsize)
		FROM dbstat d LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY d.name`)
	if err != nil {
		return nil, fmt.Errorf("dbstat: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o dbObjectBytes
		if err := rows.Scan(&o.Name, &o.Table, &o.Bytes); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var free, pageSize int64
	if err := db.QueryRowContext(ctx, `SELECT freelist_count, page_size FROM pragma_freelist_count, pragma_page_size`).Scan(&free, &pageSize); err != nil {
		return nil, fmt.Errorf("free pages: %w", err)
	}
	if free > 0 {
		out = append(out, dbObjectBytes{Name: "(free pages)", Bytes: free * pageSize})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out, nil
}
