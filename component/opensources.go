package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/ratelimit"
)

// Who may have a node created for a feed no node follows yet, by naming
// its URL in a subscription (chat or ad-hoc command): nobody, the users of
// the XMPP server's own domains (Config.LocalSources), or anyone
// (Config.OpenSources). The operator's admins may always. Each creation
// takes a token of the JID's bucket (Config.NodesPerHour), and the URL's
// host must be public when Config.CheckHost is set.

// nodeCreation decides who may have nodes created that way: openSources,
// localSources and checkHost as in Config, localDomains lower-cased,
// creations the per-JID buckets of Config.NodesPerHour. The service asks
// it before a chat or ad-hoc subscription fetches a page or makes a node.
type nodeCreation struct {
	hub          *hub.Hub
	log          *slog.Logger
	openSources  bool
	localSources bool
	checkHost    func(ctx context.Context, host string) error
	localDomains map[string]bool
	creations    *ratelimit.Keyed
	nodesPerHour int
}

// DefaultNodesPerHour is how many nodes one JID may have created per
// hour: enough for a reader bringing in the feeds they follow, few enough
// that one account cannot make pingd poll thousands of feeds.
const DefaultNodesPerHour = 20

// sourceCheckTimeout bounds the name lookup of the early address check.
const sourceCheckTimeout = 5 * time.Second

// parentDomain is the domain a component is usually part of:
// pubsub.example.org → example.org, pubsub.localhost → localhost; "" when
// the component's domain has no such parent.
func parentDomain(component jid.JID) string {
	if _, parent, _ := strings.Cut(component.Domainpart(), "."); strings.Contains(parent, ".") || parent == "localhost" {
		return parent
	}
	return ""
}

// localDomainSet checks Config.LocalDomains (default: the component's
// parent domain) and returns them lower-cased.
func localDomainSet(domains []string, component jid.JID) (map[string]bool, error) {
	set := map[string]bool{}
	for _, d := range domains {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		j, err := jid.Parse(d)
		if err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			return nil, fmt.Errorf("component: local domain %q is not a domain such as example.org", d)
		}
		set[strings.ToLower(j.Domainpart())] = true
	}
	if len(set) == 0 {
		if p := parentDomain(component); p != "" {
			set[strings.ToLower(p)] = true
		}
	}
	return set, nil
}

// isLocal reports whether bare is a JID of one of the local domains.
func (nc *nodeCreation) isLocal(bare string) bool {
	j, err := jid.Parse(bare)
	if err != nil {
		return false
	}
	return nc.localDomains[strings.ToLower(strings.TrimSuffix(j.Domainpart(), "."))]
}

// localDomainList names the local domains for an answer.
func (nc *nodeCreation) localDomainList() string {
	names := make([]string, 0, len(nc.localDomains))
	for d := range nc.localDomains {
		names = append(names, d)
	}
	if len(names) == 0 {
		return "none configured"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// mayCreateNode decides whether bare may have a node created for feedURL
// now. It returns "" when it may (a token of bare's bucket is then
// taken), or the answer saying why not.
func (nc *nodeCreation) mayCreateNode(ctx context.Context, bare, feedURL string) (string, error) {
	if msg := nc.creationRefused(bare, feedURL); msg != "" {
		return msg, nil
	}
	admin := nc.hub.IsAdmin(bare)
	canonical, err := hub.CanonicalURL(feedURL)
	if err != nil {
		return invalidURLAnswer(feedURL, err), nilUnlessInternal(err)
	}
	if msg := nc.checkSourceHost(ctx, canonical); msg != "" {
		return msg, nil
	}
	if admin {
		return "", nil
	}
	if ok, wait := nc.creations.Allow(bare, time.Now()); !ok {
		nc.log.InfoContext(ctx, "node creation refused: per-JID limit", "jid", bare, "source", canonical, "retry_in", wait)
		return fmt.Sprintf("No node follows %s yet, and %s has had %d nodes created within the hour, the most one "+
			"Jabber ID may. Try again %s.", feedURL, bare, nc.nodesPerHour, retryIn(wait)), nil
	}
	return "", nil
}

// creationRefused is the answer to bare when the operator's policy lets
// it have no node created (it is neither an admin nor, where only local
// users may, one of them); "" when the policy allows it. It is asked
// before a page is fetched to find its feed, so a user who may not add
// feeds cannot have pingd fetch pages either.
func (nc *nodeCreation) creationRefused(bare, feedURL string) string {
	switch {
	case nc.hub.IsAdmin(bare) || nc.openSources:
		return ""
	case nc.localSources && nc.isLocal(bare):
		return ""
	case nc.localSources:
		return fmt.Sprintf("No node follows %s, and this pingd creates nodes for new feeds only for users of its own "+
			"XMPP server (%s); %s is not one of them. Send \"nodes\" to see the nodes there are.",
			feedURL, nc.localDomainList(), bare)
	default:
		return fmt.Sprintf("No node follows %s, and this pingd creates nodes for new feeds only when its "+
			"operator allows it (PINGD_OPEN_SOURCES). Send \"nodes\" to see the nodes there are.", feedURL)
	}
}

// checkSourceHost refuses, before a node is created, a URL whose host is
// not a public address (Config.CheckHost): the answer then says why at
// once instead of a node whose fetches all fail. A name that does not
// resolve passes; the dial-time guard stays the authority.
func (nc *nodeCreation) checkSourceHost(ctx context.Context, rawURL string) string {
	if nc.checkHost == nil {
		return ""
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, sourceCheckTimeout)
	defer cancel()
	if err := nc.checkHost(ctx, u.Hostname()); errors.Is(err, netguard.ErrRefused) {
		return invalidURLAnswer(rawURL, err)
	}
	return ""
}

// retryIn says when a wait of d ends, for people: in whole seconds under a
// minute, else in minutes, rounded up.
func retryIn(d time.Duration) string {
	n, unit := 0, "second"
	if d < time.Minute {
		n, _ = strconv.Atoi(ratelimit.RetryAfter(d))
	} else {
		n, unit = int((d+time.Minute-1)/time.Minute), "minute"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("in %d %s", n, unit)
}
