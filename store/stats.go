package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// The status report's types are the hub's (hub/statusreport.go): the
// status page reads them without importing the store.
type (
	StatusQuery      = hub.StatusQuery
	StatusReport     = hub.StatusReport
	NodeStatus       = hub.NodeStatus
	SourceStatus     = hub.SourceStatus
	QueueStatus      = hub.QueueStatus
	DeliveryStatus   = hub.DeliveryStatus
	SubscriberStatus = hub.SubscriberStatus
	BouncingStatus   = hub.BouncingStatus
)

// DefaultStatusLimit is the length of each list of a StatusReport when the
// query does not say.
const DefaultStatusLimit = hub.DefaultStatusLimit

// StatusReport reads the report in one read-only transaction, with a fixed
// number of queries whatever the number of nodes, sources and subscribers.
func (s *sqlStore) StatusReport(ctx context.Context, q StatusQuery) (*StatusReport, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultStatusLimit
	}
	if q.PingsSince.IsZero() {
		q.PingsSince = time.Unix(0, 0) // every ping
	}
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	opts := &sql.TxOptions{ReadOnly: true}
	if s.backend == backendPostgres {
		// Every query sees the same snapshot. SQLite's transactions (WAL)
		// see one anyway.
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.read.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("status report: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	rep := &StatusReport{Subscribers: kindCounts()}
	steps := []statusStep{
		{"totals", s.statusTotals},
		{"subscribers by kind", s.statusKinds},
		{"nodes", s.statusNodes},
		{"sources", s.statusSources},
		{"fetch load", s.statusFetchLoad},
		{"deliveries", s.statusDeliveries},
		{"bouncing XMPP subscriptions", s.statusBouncing},
		{"pings", s.statusPings},
	}
	if q.Subscribers {
		steps = append(steps, statusStep{"subscribers", s.statusSubscribers})
	}
	for _, step := range steps {
		if err := step.fn(ctx, tx, q, rep); err != nil {
			return nil, fmt.Errorf("status report: %s: %w", step.what, err)
		}
	}
	return rep, nil
}

// statusStep is one query of StatusReport.
type statusStep struct {
	what string
	fn   func(context.Context, *sql.Tx, StatusQuery, *StatusReport) error
}

func kindCounts() map[hub.Kind]int {
	m := make(map[hub.Kind]int, len(hub.Kinds))
	for _, k := range hub.Kinds {
		m[k] = 0
	}
	return m
}

// sourceProblem is the condition of the sources_problems partial index
// (migration 0025), word for word so that the planners use it: a source
// failing, gone, never fetched or moved.
const sourceProblem = `(s.consecutive_errors > 0 OR s.gone OR NOT s.baselined OR s.moved_from <> '')`

// followedSource is true of a source some node follows (through the
// nodes_source index).
const followedSource = `EXISTS (SELECT 1 FROM nodes f WHERE f.source_id = s.id)`

// behindSubscriptions are the HTTP subscriptions whose cursor is behind
// their node's log, found as the delivery claim finds them: a walk of
// the node ids that have HTTP subscriptions (subscribed, one index seek
// each), then per node the range of its active subscriptions behind its
// last_seq (subscriptions_behind). The cost follows those nodes and the
// subscriptions behind, not every subscription. Its columns are the
// subscription's (s) and its node's (n); it ends in a WHERE clause a
// statement may extend with AND. SQLite keeps the join order of CROSS
// JOIN; PostgreSQL, which would rather hash every active subscription,
// is held to it by LATERAL subqueries it may not flatten (OFFSET 0).
func (s *sqlStore) behindSubscriptions() string {
	if s.backend == backendPostgres {
		return `subscribed d
	CROSS JOIN LATERAL (SELECT * FROM nodes n WHERE n.id = d.id OFFSET 0) n
	CROSS JOIN LATERAL (SELECT * FROM subscriptions s WHERE s.node_id = n.id AND ` + httpSub + `
		AND s.state = 'active' AND s.cursor_seq < n.last_seq OFFSET 0) s
	WHERE TRUE`
	}
	return `subscribed d CROSS JOIN nodes n CROSS JOIN subscriptions s
	WHERE n.id = d.id AND s.node_id = n.id AND ` + httpSub + ` AND s.state = 'active' AND s.cursor_seq < n.last_seq`
}

// postgresFence ends a subquery that PostgreSQL must plan on its own
// rather than flatten into the statement around it (OFFSET 0); SQLite
// keeps the join order of CROSS JOIN without it.
func (s *sqlStore) postgresFence() string {
	if s.backend == backendPostgres {
		return ` OFFSET 0`
	}
	return ""
}

// problemIndexed is the condition of the subscriptions_problems partial
// index (migration 0025), word for word so that the planners use it: a
// subscription failing or suspended. A delivery problem is one of those
// or an active HTTP subscription behind (behindSubscriptions). Errors and
// suspensions are the HTTP kinds' alone (an XMPP subscription's bounces
// are in xmpp_subscription_state).
const problemIndexed = `(s.consecutive_errors > 0 OR s.state = 'suspended')`

// statusTotalsSQL reads every count of the report in one row. No count
// reads the nodes, the sources or the subscriptions themselves: the
// totals count entries of an index (nodes, the distinct sources in
// nodes_source, the HTTP subscriptions in their partial index), the
// others only the rows in a partial index (sources_problems,
// nodes_behind_xmpp, subscriptions_problems), in a range of one
// (sources_due, pings_received, the states in subscriptions_waiting) or
// the subscriptions behind (behindSubscriptions). A problem is a row of
// subscriptions_problems or a subscription behind without errors (one
// with errors is in the index already; a suspended one is not active).
func (s *sqlStore) statusTotalsSQL() string {
	return s.withSubscribedNodes() + `SELECT nd.total, nx.behind_xmpp, nx.events_behind_xmpp,
		sf.total, sp.failing, sp.gone, sp.moved, sl.late,
		qu.total, qp.pending, qs.suspended, qf.failing, qf.oldest_failure,
		bh.behind, bh.events_behind, pr.problems + bh.behind_clean,
		pg.recent, (SELECT value FROM counters WHERE name = 'pings')
	FROM
		(SELECT COUNT(*) AS total FROM nodes) nd
	CROSS JOIN
		(SELECT COUNT(*) AS behind_xmpp,
			CAST(COALESCE(SUM(last_seq - xmpp_seq), 0) AS BIGINT) AS events_behind_xmpp
		FROM nodes WHERE last_seq > xmpp_seq) nx
	CROSS JOIN
		(SELECT COUNT(DISTINCT source_id) AS total FROM nodes WHERE source_id IS NOT NULL) sf
	CROSS JOIN
		(SELECT COALESCE(SUM(CASE WHEN s.consecutive_errors > 0 THEN 1 ELSE 0 END), 0) AS failing,
			COALESCE(SUM(CASE WHEN s.gone THEN 1 ELSE 0 END), 0) AS gone,
			COALESCE(SUM(CASE WHEN s.moved_from <> '' THEN 1 ELSE 0 END), 0) AS moved
		FROM sources s WHERE ` + sourceProblem + ` AND ` + followedSource + `) sp
	CROSS JOIN
		(SELECT COUNT(*) AS late FROM sources s
		WHERE NOT s.gone AND s.next_fetch_at < $2 AND ` + followedSource + `) sl
	CROSS JOIN
		(SELECT COUNT(*) AS total FROM subscriptions s` + s.httpSubscriptionsIndex() + ` WHERE ` + httpSub + `) qu
	CROSS JOIN
		(SELECT COUNT(*) AS pending FROM subscriptions s WHERE ` + httpSub + ` AND s.state IN ('pending', 'unsubscribing')) qp
	CROSS JOIN
		(SELECT COUNT(*) AS suspended FROM subscriptions s WHERE ` + httpSub + ` AND s.state = 'suspended') qs
	CROSS JOIN
		(SELECT COUNT(*) AS failing, MIN(s.first_failure_at) AS oldest_failure
		FROM subscriptions s WHERE ` + problemIndexed + ` AND s.consecutive_errors > 0 AND ` + httpSub + `) qf
	CROSS JOIN
		(SELECT COUNT(*) AS behind,
			CAST(COALESCE(SUM(n.last_seq - s.cursor_seq), 0) AS BIGINT) AS events_behind,
			COALESCE(SUM(CASE WHEN s.consecutive_errors = 0 THEN 1 ELSE 0 END), 0) AS behind_clean
		FROM ` + s.behindSubscriptions() + `) bh
	CROSS JOIN
		(SELECT COUNT(*) AS problems FROM subscriptions s WHERE ` + problemIndexed + `) pr
	CROSS JOIN
		(SELECT COUNT(*) AS recent FROM pings WHERE received_at >= $1) pg`
}

// statusTotals reads every count of the report in one row.
func (s *sqlStore) statusTotals(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	late := q.LateBefore
	if late.IsZero() {
		late = time.Unix(0, 0) // none is late
	}
	var pingsTotal sql.NullInt64
	qu := &rep.Queue
	err := s.queryRow(ctx, tx, s.statusTotalsSQL(), []any{s.timeArg(q.PingsSince), s.timeArg(late)},
		&rep.NodesTotal, &rep.NodesBehindXMPP, &rep.EventsBehindXMPP,
		&rep.SourcesTotal, &rep.SourcesFailing, &rep.SourcesGone, &rep.SourcesMoved, &rep.SourcesLate,
		&qu.Subscriptions, &qu.Pending, &qu.Suspended, &qu.Failing, tc(&qu.OldestFailure),
		&qu.Behind, &qu.EventsBehind, &qu.Problems,
		&rep.PingsRecent, &pingsTotal)
	rep.PingsTotal = pingsTotal.Int64
	return err
}

// statusFetchLoad counts the due sources, waiting and running. It reads
// only the due ones, through the sources_due index: cheap however many
// sources are followed, as long as the fetcher keeps up.
func (s *sqlStore) statusFetchLoad(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	if q.Now.IsZero() {
		return nil
	}
	return s.queryRow(ctx, tx, `SELECT
			COALESCE(SUM(CASE WHEN s.lease_until IS NULL OR s.lease_until <= $1 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN s.lease_until > $1 THEN 1 ELSE 0 END), 0),
			MIN(s.next_fetch_at)
		FROM sources s
		WHERE NOT s.gone AND s.next_fetch_at <= $1
		AND EXISTS (SELECT 1 FROM nodes f WHERE f.source_id = s.id)`, []any{s.timeArg(q.Now)},
		&rep.FetchDue, &rep.FetchRunning, tc(&rep.FetchOldestDue))
}

// statusKinds counts the subscriptions of each kind.
func (s *sqlStore) statusKinds(ctx context.Context, tx *sql.Tx, _ StatusQuery, rep *StatusReport) error {
	return s.query(ctx, tx, `SELECT kind, COUNT(*) FROM subscriptions GROUP BY kind`, nil, func(r *sql.Rows) error {
		var kind string
		var n int
		if err := r.Scan(&kind, &n); err != nil {
			return err
		}
		rep.Subscribers[hub.Kind(kind)] = n
		return nil
	})
}

// statusNodeColumns are a listed node's columns, its subscriptions'
// problems counted through their index on node_id.
const statusNodeColumns = `SELECT n.id, n.name, n.title, n.access_model, n.is_implicit,
		COALESCE(src.url, '') AS source_url,
		CASE WHEN src.consecutive_errors > 0 THEN 1 ELSE 0 END AS source_failing,
		CASE WHEN src.gone THEN 1 ELSE 0 END AS source_gone,
		n.last_seq, n.xmpp_seq,
		(SELECT COUNT(*) FROM subscriptions s WHERE s.node_id = n.id AND s.consecutive_errors > 0) AS failing,
		(SELECT COUNT(*) FROM subscriptions s WHERE s.node_id = n.id AND s.state = 'suspended') AS suspended,
		(SELECT COUNT(*) FROM subscriptions s WHERE s.node_id = n.id AND ` + httpSub + `
			AND s.state = 'active' AND s.cursor_seq < n.last_seq) AS behind
	FROM nodes n LEFT JOIN sources src ON src.id = n.source_id`

// statusNodesSQL are the status page's node lists, each in name order up
// to a limit, in the order the page shows them: nodes with a failing or
// suspended subscription (subscriptions_problems), whose source fails or
// is gone (sources_problems), behind the XMPP stream (nodes_behind_xmpp,
// walked in name order) or with an HTTP subscription behind their log
// (behindSubscriptions), then every node (walked in name order). A node
// is in every list it meets; the first shows it.
func (s *sqlStore) statusNodesSQL() []string {
	withSubscribed := s.withSubscribedNodes()
	return []string{
		statusNodeColumns + `
	WHERE n.id IN (SELECT s.node_id FROM subscriptions s WHERE ` + problemIndexed + `)
	ORDER BY n.name LIMIT $1`,
		statusNodeColumns + `
	WHERE n.source_id IN (SELECT s.id FROM sources s WHERE ` + sourceProblem + ` AND (s.consecutive_errors > 0 OR s.gone))
	ORDER BY n.name LIMIT $1`,
		// Behind: the two lists are merged by name.
		statusNodeColumns + `
	WHERE n.last_seq > n.xmpp_seq
	ORDER BY n.name LIMIT $1`,
		// The nodes behind come first and are joined to their rows by
		// key (the fence keeps PostgreSQL from hashing every node).
		withSubscribed + strings.Replace(statusNodeColumns, "FROM nodes n", `FROM (SELECT DISTINCT d.id FROM `+s.behindSubscriptions()+s.postgresFence()+`) b
	CROSS JOIN nodes n`, 1) + `
	WHERE n.id = b.id
	ORDER BY n.name LIMIT $1`,
		statusNodeColumns + `
	ORDER BY n.name LIMIT $1`,
	}
}

// statusNodes lists the nodes with their subscriber counts, nodes with
// problems first, each kind of problem by name, then the others by name.
// Each query reads at most q.Limit nodes beyond its problem's rows, so
// the reading is bounded however many nodes there are: each list is
// read up to q.Limit rows, enough to fill what the lists before it left
// (a row already shown takes the place of one shown before).
func (s *sqlStore) statusNodes(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	listed := map[int64]int{} // node id: its index in rep.Nodes
	read := func(query string) ([]NodeStatus, error) {
		var out []NodeStatus
		err := s.query(ctx, tx, query, []any{q.Limit}, func(r *sql.Rows) error {
			var n NodeStatus
			var access string
			var srcFailing, srcGone int
			if err := r.Scan(&n.ID, &n.Name, &n.Title, &access, &n.Implicit, &n.SourceURL, &srcFailing, &srcGone,
				&n.LastSeq, &n.XMPPSeq, &n.Failing, &n.Suspended, &n.Behind); err != nil {
				return err
			}
			n.AccessModel = hub.AccessModel(access)
			n.SourceFailing, n.SourceGone = srcFailing > 0, srcGone > 0
			n.Subscribers = kindCounts()
			out = append(out, n)
			return nil
		})
		return out, err
	}
	add := func(nodes []NodeStatus) {
		for _, n := range nodes {
			if _, seen := listed[n.ID]; seen || len(rep.Nodes) >= q.Limit {
				continue
			}
			listed[n.ID] = len(rep.Nodes)
			rep.Nodes = append(rep.Nodes, n)
		}
	}
	lists := s.statusNodesSQL()
	for i := 0; i < len(lists) && len(rep.Nodes) < q.Limit; i++ {
		nodes, err := read(lists[i])
		if err != nil {
			return err
		}
		if i == 2 { // behind XMPP, merged by name with behind HTTP
			i++
			more, err := read(lists[i])
			if err != nil {
				return err
			}
			nodes = append(nodes, more...)
			slices.SortStableFunc(nodes, func(a, b NodeStatus) int { return strings.Compare(a.Name, b.Name) })
		}
		add(nodes)
	}
	return s.statusNodeKinds(ctx, tx, rep, listed)
}

// statusNodeKinds counts the subscriptions of the listed nodes by kind.
func (s *sqlStore) statusNodeKinds(ctx context.Context, tx *sql.Tx, rep *StatusReport, listed map[int64]int) error {
	ids := make([]int64, 0, len(listed))
	for _, n := range rep.Nodes {
		ids = append(ids, n.ID)
	}
	for _, chunk := range chunks(ids) {
		in, args := inList(1, chunk)
		err := s.query(ctx, tx, `SELECT node_id, kind, COUNT(*) FROM subscriptions WHERE node_id IN (`+in+`)
			GROUP BY node_id, kind`, args, func(r *sql.Rows) error {
			var nodeID int64
			var kind string
			var count int
			if err := r.Scan(&nodeID, &kind, &count); err != nil {
				return err
			}
			if i, ok := listed[nodeID]; ok {
				rep.Nodes[i].Subscribers[hub.Kind(kind)] = count
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// statusSourceColumns are a listed source's columns (not its body).
const statusSourceColumns = `SELECT s.id, s.url, s.original_url, s.title, s.is_feed, s.baselined, s.gone, s.moved_from, s.moved_at,
		s.last_fetch_at, s.last_status, s.last_error, s.consecutive_errors, s.last_change_at, s.last_ping_at,
		s.next_fetch_at, s.next_fetch_reason,
		(SELECT COUNT(*) FROM nodes f WHERE f.source_id = s.id),
		(SELECT COALESCE(MAX(CASE WHEN o.access_model = 'open' THEN 1 ELSE 0 END), 0) FROM nodes o WHERE o.source_id = s.id)
	FROM sources s`

// statusProblemSourcesSQL lists the followed sources with a problem, worst
// first, from the sources_problems index; statusOtherSourcesSQL the others
// by URL, through the index on the URLs.
const (
	statusProblemSourcesSQL = statusSourceColumns + `
	WHERE ` + sourceProblem + ` AND ` + followedSource + `
	ORDER BY CASE WHEN s.consecutive_errors > 0 THEN 0
		WHEN s.gone THEN 1
		WHEN NOT s.baselined THEN 2
		WHEN s.moved_from <> '' THEN 3
		ELSE 4 END, s.consecutive_errors DESC, s.url, s.id
	LIMIT $1`
	statusOtherSourcesSQL = statusSourceColumns + `
	WHERE NOT ` + sourceProblem + ` AND ` + followedSource + `
	ORDER BY s.url, s.id
	LIMIT $1`
)

// statusSources lists the followed sources, worst first: failing, gone,
// never fetched, moved, then the rest by URL. The body is not read.
func (s *sqlStore) statusSources(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	scan := func(r *sql.Rows) error {
		var src SourceStatus
		var open int
		if err := r.Scan(&src.ID, &src.URL, &src.OriginalURL, &src.Title, &src.IsFeed, &src.Baselined, &src.Gone,
			&src.MovedFrom, tc(&src.MovedAt), tc(&src.LastFetchAt), &src.LastStatus, &src.LastError,
			&src.ConsecutiveErrors, tc(&src.LastChangeAt), tc(&src.LastPingAt), tc(&src.NextFetchAt),
			&src.NextFetchReason, &src.Nodes, &open); err != nil {
			return err
		}
		src.Open = open > 0
		rep.Sources = append(rep.Sources, src)
		return nil
	}
	if err := s.query(ctx, tx, statusProblemSourcesSQL, []any{q.Limit}, scan); err != nil {
		return err
	}
	if rest := q.Limit - len(rep.Sources); rest > 0 {
		return s.query(ctx, tx, statusOtherSourcesSQL, []any{rest}, scan)
	}
	return nil
}

// statusDeliveries lists the HTTP subscriptions with a problem, worst
// first.
func (s *sqlStore) statusDeliveries(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	query := s.statusDeliveriesSQL()
	return s.query(ctx, tx, query, []any{q.Limit}, func(r *sql.Rows) error {
		var d DeliveryStatus
		var kind, state string
		ds := &d.DeliveryState
		if err := r.Scan(&d.ID, &d.NodeName, &kind, &d.Address, &state, &d.Cursor, &d.NodeLastSeq,
			&ds.Attempts, &ds.ConsecutiveErrors, tc(&ds.FirstFailureAt), tc(&ds.NextAttemptAt), &ds.LastError,
			tc(&ds.LastDeliveredAt), &ds.LastStatus); err != nil {
			return err
		}
		d.Kind, d.State = hub.Kind(kind), hub.SubState(state)
		ds.Cursor = d.Cursor
		rep.Deliveries = append(rep.Deliveries, d)
		return nil
	})
}

// statusDeliveriesSQL lists the delivery problems, worst first: the rows
// of subscriptions_problems and the subscriptions behind without errors
// (behindSubscriptions), read apart through their indexes and sorted
// together.
func (s *sqlStore) statusDeliveriesSQL() string {
	const columns = `s.id, n.name, s.kind, s.address, s.state, s.cursor_seq, n.last_seq,
		s.attempts, s.consecutive_errors, s.first_failure_at, s.next_attempt_at, s.last_error,
		s.last_delivered_at, s.last_status`
	return s.withSubscribedNodes() + `SELECT * FROM (
		SELECT ` + columns + ` FROM subscriptions s CROSS JOIN nodes n
		WHERE ` + problemIndexed + ` AND n.id = s.node_id
		UNION ALL
		SELECT ` + columns + ` FROM ` + s.behindSubscriptions() + ` AND s.consecutive_errors = 0) p
	ORDER BY CASE WHEN p.consecutive_errors > 0 OR p.state = 'suspended' THEN 0 ELSE 1 END,
		CASE WHEN p.first_failure_at IS NULL THEN 1 ELSE 0 END, p.first_failure_at,
		p.last_seq - p.cursor_seq DESC, p.id
	LIMIT $1`
}

// statusPings lists the newest pings since q.PingsSince.
func (s *sqlStore) statusPings(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	return s.query(ctx, tx, `SELECT id, dialect, name, url, remote, received_at FROM pings
		WHERE received_at >= $1 ORDER BY received_at DESC, id DESC LIMIT $2`,
		[]any{s.timeArg(q.PingsSince), q.Limit}, func(r *sql.Rows) error {
			var p hub.Ping
			if err := r.Scan(&p.ID, &p.Dialect, &p.Name, &p.URL, &p.Remote, tc(&p.ReceivedAt)); err != nil {
				return err
			}
			rep.Pings = append(rep.Pings, p)
			return nil
		})
}

// statusSubscribers lists the newest subscriptions of every kind.
func (s *sqlStore) statusSubscribers(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	return s.query(ctx, tx, `SELECT s.id, n.name, s.kind, s.address, s.state, s.created_at, s.expires_at
		FROM subscriptions s JOIN nodes n ON n.id = s.node_id
		ORDER BY s.id DESC LIMIT $1`, []any{q.Limit}, func(r *sql.Rows) error {
		var sub SubscriberStatus
		var kind, state string
		if err := r.Scan(&sub.ID, &sub.NodeName, &kind, &sub.Address, &state, tc(&sub.CreatedAt),
			tc(&sub.ExpiresAt)); err != nil {
			return err
		}
		sub.Kind, sub.State = hub.Kind(kind), hub.SubState(state)
		rep.RecentSubscribers = append(rep.RecentSubscribers, sub)
		return nil
	})
}
