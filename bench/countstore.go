package bench

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// countingStore counts the calls pingd makes to its store, by method, so
// a measurement can show how many database writes a publish costs at
// each subscriber count. Every method that changes the database is
// counted, plus the reads on the notification path.
type countingStore struct {
	store.Store
	mu     sync.Mutex
	counts map[string]int64
	tagged map[string]map[string]int64
	// fetchesStored counts the fetch outcomes stored (ApplyFetch and
	// ApplyUnchangedFetches without error, releases of unfetched sources
	// left out): the end of a poll.
	fetchesStored atomic.Int64
}

func newCountingStore(s store.Store) *countingStore {
	return &countingStore{Store: s, counts: map[string]int64{}, tagged: map[string]map[string]int64{}}
}

// countTag marks a context whose store calls are also counted apart, so
// the calls one hub method makes can be told from those of transports
// running at the same time.
type countTag struct{}

func withCountTag(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, countTag{}, tag)
}

func (s *countingStore) inc(ctx context.Context, method string) {
	s.mu.Lock()
	s.counts[method]++
	if tag, ok := ctx.Value(countTag{}).(string); ok {
		if s.tagged[tag] == nil {
			s.tagged[tag] = map[string]int64{}
		}
		s.tagged[tag][method]++
	}
	s.mu.Unlock()
}

// TakeTagged returns the calls made under tag since the last take.
func (s *countingStore) TakeTagged(tag string) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.tagged[tag]
	delete(s.tagged, tag)
	if out == nil {
		out = map[string]int64{}
	}
	return out
}

// Snapshot returns the counts so far.
func (s *countingStore) Snapshot() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}

// writeMethods are the store methods that change the database.
var writeMethods = []string{
	"CreateNode", "UpdateNodeConfig", "SetNodeToken", "SetNodeSource", "DeleteNode",
	"Append", "SetXMPPSeq", "EnsureSource", "MarkSourceDue", "ClaimDueSources", "ApplyFetch", "ApplyUnchangedFetches",
	"PutSubscription", "DeleteSubscriptions", "DeleteSubscription", "SetSubscriptionState",
	"ClaimDeliveries", "SaveDeliveryState", "SaveDeliveryStates", "DeleteExpiredSubscriptions", "SetAffiliation",
	"RecordPingMarkingDue", "Prune",
}

// diffCounts returns after−before for the methods that changed.
func diffCounts(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// writes sums the write calls of a diff.
func writes(d map[string]int64) int64 {
	var n int64
	for _, m := range writeMethods {
		n += d[m]
	}
	return n
}

// sortedKeys lists the methods of a diff by name.
func sortedKeys(d map[string]int64) []string {
	return slices.Sorted(maps.Keys(d))
}

func (s *countingStore) CreateNode(ctx context.Context, n *hub.Node) error {
	s.inc(ctx, "CreateNode")
	return s.Store.CreateNode(ctx, n)
}

func (s *countingStore) Node(ctx context.Context, name string) (*hub.Node, error) {
	s.inc(ctx, "Node")
	return s.Store.Node(ctx, name)
}

func (s *countingStore) NodeByID(ctx context.Context, id int64) (*hub.Node, error) {
	s.inc(ctx, "NodeByID")
	return s.Store.NodeByID(ctx, id)
}

func (s *countingStore) UpdateNodeConfig(ctx context.Context, name string, cfg hub.NodeConfig) error {
	s.inc(ctx, "UpdateNodeConfig")
	return s.Store.UpdateNodeConfig(ctx, name, cfg)
}

func (s *countingStore) SetNodeToken(ctx context.Context, name string, hash []byte) error {
	s.inc(ctx, "SetNodeToken")
	return s.Store.SetNodeToken(ctx, name, hash)
}

func (s *countingStore) SetNodeSource(ctx context.Context, name string, sourceID int64) error {
	s.inc(ctx, "SetNodeSource")
	return s.Store.SetNodeSource(ctx, name, sourceID)
}

func (s *countingStore) DeleteNode(ctx context.Context, name string) error {
	s.inc(ctx, "DeleteNode")
	return s.Store.DeleteNode(ctx, name)
}

func (s *countingStore) Append(ctx context.Context, nodeID int64, events []hub.Event) ([]hub.Event, error) {
	s.inc(ctx, "Append")
	return s.Store.Append(ctx, nodeID, events)
}

func (s *countingStore) EventsAfter(ctx context.Context, nodeID int64, after int64, limit int) ([]hub.Event, error) {
	s.inc(ctx, "EventsAfter")
	return s.Store.EventsAfter(ctx, nodeID, after, limit)
}

func (s *countingStore) SetXMPPSeq(ctx context.Context, nodeID int64, seq int64) error {
	s.inc(ctx, "SetXMPPSeq")
	return s.Store.SetXMPPSeq(ctx, nodeID, seq)
}

func (s *countingStore) EnsureSource(ctx context.Context, url string) (*hub.Source, bool, error) {
	s.inc(ctx, "EnsureSource")
	return s.Store.EnsureSource(ctx, url)
}

func (s *countingStore) MarkSourceDue(ctx context.Context, id int64, at time.Time, note *hub.ChangeNote) error {
	s.inc(ctx, "MarkSourceDue")
	return s.Store.MarkSourceDue(ctx, id, at, note)
}

func (s *countingStore) ClaimDueSources(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Source, error) {
	s.inc(ctx, "ClaimDueSources")
	return s.Store.ClaimDueSources(ctx, now, limit, owner, until)
}

func (s *countingStore) ApplyFetch(ctx context.Context, o hub.FetchOutcome) (hub.FetchApplied, error) {
	s.inc(ctx, "ApplyFetch")
	applied, err := s.Store.ApplyFetch(ctx, o)
	if err == nil && isPoll(o) {
		s.fetchesStored.Add(1)
	}
	return applied, err
}

func (s *countingStore) ApplyUnchangedFetches(ctx context.Context, outs []hub.FetchOutcome) error {
	s.inc(ctx, "ApplyUnchangedFetches")
	err := s.Store.ApplyUnchangedFetches(ctx, outs)
	if err == nil {
		for _, o := range outs {
			if isPoll(o) {
				s.fetchesStored.Add(1)
			}
		}
	}
	return err
}

// releaseReasons are the next-fetch reasons of the outcomes that give a
// claimed source back unfetched (shutdown, a busy or paused host, an
// origin's Retry-After): they end no poll. The benchmarks' origins never
// answer Retry-After, so no fetch ends with that reason there.
var releaseReasons = map[string]bool{
	hub.ReasonInterrupted: true, hub.ReasonHostBusy: true, hub.ReasonHostPaused: true, hub.ReasonRetryAfter: true,
}

// isPoll says whether a stored outcome ends a fetch.
func isPoll(o hub.FetchOutcome) bool { return !releaseReasons[o.State.NextFetchReason] }

func (s *countingStore) PutSubscription(ctx context.Context, sub *hub.Subscription) (bool, error) {
	s.inc(ctx, "PutSubscription")
	return s.Store.PutSubscription(ctx, sub)
}

func (s *countingStore) Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error) {
	s.inc(ctx, "Subscriptions")
	return s.Store.Subscriptions(ctx, f)
}

func (s *countingStore) DeleteSubscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error) {
	s.inc(ctx, "DeleteSubscriptions")
	return s.Store.DeleteSubscriptions(ctx, f)
}

func (s *countingStore) DeleteSubscription(ctx context.Context, id int64) error {
	s.inc(ctx, "DeleteSubscription")
	return s.Store.DeleteSubscription(ctx, id)
}

func (s *countingStore) SetSubscriptionState(ctx context.Context, id int64, state hub.SubState, expires time.Time) error {
	s.inc(ctx, "SetSubscriptionState")
	return s.Store.SetSubscriptionState(ctx, id, state, expires)
}

func (s *countingStore) ClaimDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time) ([]hub.Subscription, error) {
	s.inc(ctx, "ClaimDeliveries")
	return s.Store.ClaimDeliveries(ctx, now, nodeID, limit, owner, until)
}

// ClaimNodeDeliveries is counted as the claim it is.
func (s *countingStore) ClaimNodeDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time, eventsLimit int, held hub.EventSpan) (*hub.NodeClaim, error) {
	s.inc(ctx, "ClaimDeliveries")
	return s.Store.ClaimNodeDeliveries(ctx, now, nodeID, limit, owner, until, eventsLimit, held)
}

func (s *countingStore) SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error {
	s.inc(ctx, "SaveDeliveryStates")
	return s.Store.SaveDeliveryStates(ctx, states)
}

func (s *countingStore) SaveDeliveryState(ctx context.Context, id int64, st hub.DeliveryState) error {
	s.inc(ctx, "SaveDeliveryState")
	return s.Store.SaveDeliveryState(ctx, id, st)
}

func (s *countingStore) DeleteExpiredSubscriptions(ctx context.Context, now time.Time) ([]hub.Subscription, error) {
	s.inc(ctx, "DeleteExpiredSubscriptions")
	return s.Store.DeleteExpiredSubscriptions(ctx, now)
}

func (s *countingStore) SetAffiliation(ctx context.Context, nodeID int64, jid string, a hub.Affiliation) error {
	s.inc(ctx, "SetAffiliation")
	return s.Store.SetAffiliation(ctx, nodeID, jid, a)
}

func (s *countingStore) RecordPingMarkingDue(ctx context.Context, p *hub.Ping, urls []string, at time.Time, note *hub.ChangeNote) ([]int64, error) {
	s.inc(ctx, "RecordPingMarkingDue")
	return s.Store.RecordPingMarkingDue(ctx, p, urls, at, note)
}

func (s *countingStore) Prune(ctx context.Context, pingsBefore time.Time) error {
	s.inc(ctx, "Prune")
	return s.Store.Prune(ctx, pingsBefore)
}
