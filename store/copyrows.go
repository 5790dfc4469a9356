package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// targetColumns maps the target table's columns to their types.
func targetColumns(ctx context.Context, tx pgx.Tx, table string) (map[string]string, error) {
	rows, err := tx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, table)
	if err != nil {
		return nil, fmt.Errorf("target: columns of %s: %w", table, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		out[name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("target: columns of %s: %w", table, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("target: table %s has no columns", table)
	}
	return out, nil
}

// rowSource feeds SQLite rows to COPY, converted to the target's types.
type rowSource struct {
	rows  *sql.Rows
	table string
	cols  []string
	kinds []string
	row   int64
	err   error
}

func (r *rowSource) Next() bool {
	if r.err != nil {
		return false
	}
	return r.rows.Next()
}

func (r *rowSource) Values() ([]any, error) {
	r.row++
	raw := make([]any, len(r.cols))
	ptrs := make([]any, len(r.cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		r.err = fmt.Errorf("source: read %s: %w", r.table, err)
		return nil, r.err
	}
	for i, v := range raw {
		cv, err := toPostgres(v, r.kinds[i])
		if err != nil {
			r.err = fmt.Errorf("table %s, row %d, column %s: %w", r.table, r.row, r.cols[i], err)
			return nil, r.err
		}
		raw[i] = cv
	}
	return raw, nil
}

func (r *rowSource) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.rows.Err()
}

// toPostgres converts a value read from SQLite (int64, float64, string,
// []byte or nil) to what a PostgreSQL column of type pgType takes.
func toPostgres(v any, pgType string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch pgType {
	case "bigint", "integer", "smallint":
		if n, ok := v.(int64); ok {
			return n, nil
		}
	case "boolean":
		if n, ok := v.(int64); ok {
			return n != 0, nil
		}
	case "timestamp with time zone":
		s, ok := asText(v)
		if !ok {
			break
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("time %q: %w", s, err)
		}
		return t.UTC(), nil
	case "bytea":
		switch b := v.(type) {
		case []byte:
			return b, nil
		case string:
			return []byte(b), nil
		}
	case "text", "jsonb", "json":
		if s, ok := asText(v); ok {
			return s, nil
		}
	default:
		return nil, fmt.Errorf("the target column type %q is not supported by the copy", pgType)
	}
	return nil, fmt.Errorf("a %T cannot go into a %s column", v, pgType)
}

func asText(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}
