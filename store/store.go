package store

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// Store is everything the store keeps: the hub's ports, those of the
// parts that use it beside the hub (the delivery engine's claims and
// states, the component's XMPP cursors and node deletions, the health
// check: each of those declares the few methods it calls and is given the
// store by cmd/pingd), and what only operators need.
type Store interface {
	hub.NodeStore
	hub.LogStore
	hub.SourceStore
	hub.SubscriptionStore
	hub.ReaderStore
	hub.AffiliationStore
	hub.PingStore
	hub.MaintenanceStore
	// The fetch engine's claims and outcomes (its contracts are
	// hub/fetching's Store).
	ClaimDueSources(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Source, error)
	ApplyFetch(ctx context.Context, o hub.FetchOutcome) (hub.FetchApplied, error)
	ApplyUnchangedFetches(ctx context.Context, outs []hub.FetchOutcome) error
	SourcesLeasedByOthers(ctx context.Context, owner string, now time.Time) ([]hub.Source, error)
	SourcesLeasedBy(ctx context.Context, owner string) ([]hub.Source, error)
	NextSourceDue(ctx context.Context, now time.Time) (time.Time, error)

	// Check answers nil while the database answers (health checks).
	Check(ctx context.Context) error
	Close() error
	// NodeDeletions lists the recorded node deletions, oldest first, at
	// most limit.
	NodeDeletions(ctx context.Context, limit int) ([]hub.NodeDeletion, error)
	// ForgetNodeDeletions removes recorded node deletions whose
	// subscribers were told; ids that are gone already are no error.
	ForgetNodeDeletions(ctx context.Context, ids []int64) error
	// SetXMPPSeq records that events up to seq went to the XMPP server; it
	// never moves the cursor back.
	SetXMPPSeq(ctx context.Context, nodeID int64, seq int64) error
	// NodesBehindXMPP lists nodes whose LastSeq is beyond their XMPPSeq.
	NodesBehindXMPP(ctx context.Context) ([]hub.Node, error)
	// The delivery engine's verified changes, claims and states (their
	// contracts are delivery's Store).
	ApplySubscriptionChange(ctx context.Context, id int64, changeID string, expires time.Time) (bool, error)
	ReleaseSubscriptionChange(ctx context.Context, id int64, changeID, owner string) error
	RefuseSubscriptionChange(ctx context.Context, id int64, changeID string) (bool, error)
	ClaimDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time) ([]hub.Subscription, error)
	ClaimNodeDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time, eventsLimit int, held hub.EventSpan) (*hub.NodeClaim, error)
	SaveDeliveryState(ctx context.Context, id int64, st hub.DeliveryState) error
	SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error
	RenewDeliveryLeases(ctx context.Context, owner string, ids []int64, until time.Time) (int64, error)
	ReleaseDeliveryLeases(ctx context.Context, owner string) (int64, error)
	hub.UpstreamStore // upstream.go
	hub.PingArchive   // misc.go
	hub.RelayStore    // relay.go
	// RecordPing stores a received ping and sets its ID, nothing else
	// (the hub records a ping with RecordPingMarkingDue; copies and tests
	// record one alone).
	RecordPing(ctx context.Context, p *hub.Ping) error
	// SubscriberCount counts the subscriptions of every kind of the nodes
	// following the source (the User-Agent's "N subscribers"); the fetch
	// loop has them from its claim (ClaimDueSources), upstream asks here.
	SubscriberCount(ctx context.Context, sourceID int64) (int, error)
	// Backend names the database behind the store: "sqlite" or "postgres".
	Backend() string
	// TryLeader takes the named leader lock if no other process holds it
	// (ErrLeaderHeld if one does): on PostgreSQL a session-level advisory
	// lock on a connection of its own, on SQLite a flock on a file beside
	// the database. The holder's death frees it at once. See Leader.
	TryLeader(ctx context.Context, name string) (*Leader, error)
	// Wakeups returns this process's end of the channel on which the
	// processes sharing the database announce nodes with new work
	// (PostgreSQL LISTEN/NOTIFY; nothing on SQLite).
	Wakeups() *Wakeups
	StatusReport(ctx context.Context, q StatusQuery) (*StatusReport, error) // the status page's figures (stats.go)
}

// HubStores is s as each of the hub's store ports.
func HubStores(s Store) hub.Stores {
	return hub.Stores{Nodes: s, Log: s, Sources: s, Subscriptions: s,
		Readers: s, Affiliations: s, Pings: s, Maintenance: s}
}

// *sqlStore is every port, and is what Open returns on both backends.
var (
	_ hub.NodeStore         = (*sqlStore)(nil)
	_ hub.LogStore          = (*sqlStore)(nil)
	_ hub.SourceStore       = (*sqlStore)(nil)
	_ hub.SubscriptionStore = (*sqlStore)(nil)
	_ hub.ReaderStore       = (*sqlStore)(nil)
	_ hub.AffiliationStore  = (*sqlStore)(nil)
	_ hub.PingStore         = (*sqlStore)(nil)
	_ hub.MaintenanceStore  = (*sqlStore)(nil)
	_ Store                 = (*sqlStore)(nil)
)

// Options tune a store; zero values take the defaults.
type Options struct {
	// QueryTimeout bounds each query; default DefaultQueryTimeout.
	QueryTimeout time.Duration
	// MaxConns is the PostgreSQL pool size; default DefaultMaxConns.
	MaxConns int
	Logger   *slog.Logger
}

// Defaults of Options: what a zero (or negative) field is taken as.
const (
	DefaultQueryTimeout = 5 * time.Second
	// DefaultMaxConns PostgreSQL connections per process leave room for
	// several pingd processes under PostgreSQL's own default limit of 100.
	DefaultMaxConns = 10
)

func (o *Options) setDefaults() {
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Open opens (creating if needed) and migrates the database named by dsn:
// "postgres://…" or "postgresql://…" is PostgreSQL; "sqlite:PATH",
// "file:PATH" or a plain path is an SQLite file.
func Open(ctx context.Context, dsn string, opt Options) (Store, error) {
	opt.setDefaults()
	target, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	switch target.backend {
	case backendPostgres:
		return openPostgres(ctx, target.location, opt)
	default:
		return openSQLite(ctx, target.location, target.params, opt)
	}
}

const (
	backendSQLite   = "sqlite"
	backendPostgres = "postgres"
)

// dsnTarget is what a DSN names.
type dsnTarget struct {
	backend string
	// location is the PostgreSQL URL or the SQLite file path.
	location string
	// params are SQLite URI parameters given with "file:PATH?…".
	params url.Values
}

// parseDSN tells the backend from the DSN. A "file:" DSN may carry SQLite
// URI parameters after "?"; the other SQLite forms are taken as literal
// paths.
func parseDSN(dsn string) (dsnTarget, error) {
	if strings.TrimSpace(dsn) == "" {
		return dsnTarget{}, fmt.Errorf("open database: empty database name")
	}
	if strings.ContainsRune(dsn, 0) {
		return dsnTarget{}, fmt.Errorf("open database: the database name contains a NUL byte")
	}
	lower := strings.ToLower(dsn)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return dsnTarget{backend: backendPostgres, location: dsn}, nil
	case strings.HasPrefix(lower, "sqlite:"):
		return sqliteTarget(dsn[len("sqlite:"):], nil, true)
	case strings.HasPrefix(lower, "file:"):
		path, query, _ := strings.Cut(dsn[len("file:"):], "?")
		params, err := url.ParseQuery(query)
		if err != nil {
			return dsnTarget{}, fmt.Errorf("open database %q: parameters: %w", dsn, err)
		}
		return sqliteTarget(path, params, true)
	}
	return sqliteTarget(dsn, nil, false)
}

// sqliteTarget checks an SQLite path; uriForm says it came after "sqlite:"
// or "file:", where "//" starts a host.
func sqliteTarget(path string, params url.Values, uriForm bool) (dsnTarget, error) {
	if uriForm {
		// "sqlite:///abs/path" and "file:///abs/path" name an absolute path.
		if strings.HasPrefix(path, "///") {
			path = path[2:]
		} else if strings.HasPrefix(path, "//") {
			return dsnTarget{}, fmt.Errorf("open database %q: a host in an SQLite name is not supported", path)
		}
	}
	if path == "" {
		return dsnTarget{}, fmt.Errorf("open database: empty SQLite path")
	}
	if path == ":memory:" {
		return dsnTarget{}, fmt.Errorf("open database: in-memory SQLite databases are not supported (they would lose everything on exit)")
	}
	return dsnTarget{backend: backendSQLite, location: path, params: params}, nil
}
