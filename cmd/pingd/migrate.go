package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pingd/pingd/store"
)

// migrateCommand copies an installation's state from its SQLite file into
// an empty PostgreSQL database: pingd migrate-db --from sqlite:PATH --to
// postgres://… [--force].
func migrateCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate-db", stderr)
	from := fs.String("from", "", "the SQLite database to copy (sqlite:PATH or a path)")
	to := fs.String("to", "", "the PostgreSQL database to copy into (postgres://…)")
	force := fs.Bool("force", false, "replace whatever the target holds")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: pingd migrate-db --from sqlite:PATH --to postgres://… [--force]

Copies every table of a pingd SQLite database into a PostgreSQL database,
which it migrates first and which must be empty (--force replaces what it
holds). The source is read in one transaction, a consistent snapshot even
while a pingd serves it; what that pingd writes afterwards is not copied,
so stop it before the final copy. Row counts are checked afterwards.
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pingd migrate-db: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *from == "" || *to == "" {
		fmt.Fprintln(stderr, "pingd migrate-db: both --from and --to are required")
		fs.Usage()
		return errUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	report, err := store.Copy(ctx, *from, *to, store.CopyOptions{
		Force:   *force,
		Options: store.Options{Logger: log, QueryTimeout: time.Minute},
	})
	if err != nil {
		return fmt.Errorf("migrate-db: %w", err)
	}
	var total int64
	fmt.Fprintf(stdout, "copied schema version %d in %s", report.SchemaVersion, report.Took.Round(time.Millisecond))
	if report.Replaced {
		fmt.Fprint(stdout, ", replacing what the target held")
	}
	fmt.Fprintln(stdout)
	width := len("total")
	for _, tc := range report.Tables {
		width = max(width, len(tc.Table))
	}
	for _, tc := range report.Tables {
		fmt.Fprintf(stdout, "  %-*s %10d rows\n", width, tc.Table, tc.Rows)
		total += tc.Rows
	}
	fmt.Fprintf(stdout, "  %-*s %10d rows, counts checked against the source\n", width, "total", total)
	fmt.Fprintln(stdout, "Next: point PINGD_DB at the target and start pingd there.")
	return nil
}
