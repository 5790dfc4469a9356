package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/internal/cnws"
	"github.com/pingd/pingd/internal/xmppaddr"
)

// Config is pingd's effective configuration: defaults, then the config
// file, then PINGD_* environment variables, then flags.
type Config struct {
	XMPPAddr           string        `opt:"xmpp-addr" env:"PINGD_XMPP_ADDR" default:"127.0.0.1:5347" help:"the XMPP server's component port (host:port)"`
	XMPPDomain         string        `opt:"xmpp-domain" env:"PINGD_XMPP_DOMAIN" default:"pubsub.localhost" help:"the component's JID, as configured in the XMPP server"`
	XMPPSecret         string        `opt:"xmpp-secret" env:"PINGD_XMPP_SECRET" secret:"true" help:"the component secret (required)"`
	XMPPShared         bool          `opt:"xmpp-shared" env:"PINGD_XMPP_SHARED" default:"false" help:"1: the XMPP server takes several connections under the component's name (ejabberd): every pingd process on one PostgreSQL connects, the leader alone sends notifications"`
	XMPPMulticast      string        `opt:"xmpp-multicast" env:"PINGD_XMPP_MULTICAST" default:"auto" help:"XEP-0033 multicast of notifications: auto (use the XMPP server's multicast service when it has one), off, or the service's JID"`
	XMPPMulticastMax   int           `opt:"xmpp-multicast-max" env:"PINGD_XMPP_MULTICAST_MAX" default:"0" help:"addresses per multicast stanza, never above the service's announced limit (0: the service's limit, 20 when it announces none)"`
	XMPPMulticastShare int           `opt:"xmpp-multicast-share" env:"PINGD_XMPP_MULTICAST_SHARE" default:"50" help:"percent (1-100) of the subscribers on the server's domain addressed through its multicast service; the others get one stanza each, so the server's two paths fan out in parallel (100: all through the service)"`
	HTTPAddr           string        `opt:"http-addr" env:"PINGD_HTTP_ADDR" default:"127.0.0.1:8080" help:"HTTP listen address"`
	PublicURL          string        `opt:"public-url" env:"PINGD_PUBLIC_URL" default:"http://localhost:8080" help:"base URL written into discovery documents, feeds and links"`
	TrustedProxies     string        `opt:"trusted-proxies" env:"PINGD_TRUSTED_PROXIES" help:"comma-separated addresses or CIDR prefixes of the reverse proxies in front of the HTTP side: from them only, the client's address is read from Forwarded or X-Forwarded-For (for per-client rate limits and the recorded ping origins); none: the TCP peer is the client"`
	DB                 string        `opt:"db" env:"PINGD_DB" default:"pingd.db" help:"SQLite file path, or a postgres:// URL"`
	DBMaxConns         int           `opt:"db-max-conns" env:"PINGD_DB_MAX_CONNS" default:"10" help:"PostgreSQL connections in the pool of each pingd process (it opens three more of its own: leader lock, wake-ups and the health check)"`
	Instance           string        `opt:"instance" env:"PINGD_INSTANCE" help:"this process's name in the leases it takes on the database (deliveries, fetches), which must differ between the pingd processes sharing one PostgreSQL and stay the same across restarts, so that a restarted process takes back at once what it held when it died (none: the host name and --http-addr, as in web1/127.0.0.1:8080)"`
	AdminToken         string        `opt:"admin-token" env:"PINGD_ADMIN_TOKEN" secret:"true" help:"bearer token for /api/ (none: /api/ answers 401)"`
	Admins             string        `opt:"admins" env:"PINGD_ADMINS" help:"comma-separated bare JIDs that own every node over XMPP"`
	UpstreamPush       bool          `opt:"upstream-push" env:"PINGD_UPSTREAM_PUSH" default:"true" help:"1: subscribe to the WebSub hub or rssCloud cloud a source advertises, and poll it only as a safety net"`
	UpstreamSafetyPoll time.Duration `opt:"upstream-safety-poll" env:"PINGD_UPSTREAM_SAFETY_POLL" default:"6h" help:"how often a source whose upstream push is active is still polled"`
	UpstreamCheck      time.Duration `opt:"upstream-check" env:"PINGD_UPSTREAM_CHECK" default:"1m" help:"how often upstream renewals, new subscribers and departures are looked at"`
	FetchWorkers       int           `opt:"fetch-workers" env:"PINGD_FETCH_WORKERS" default:"8" help:"sources fetched at once"`
	FetchesPerHost     int           `opt:"fetches-per-host" env:"PINGD_FETCHES_PER_HOST" default:"2" help:"fetches of one origin (host and port) at once, however many of its feeds are due"`
	FetchHostSpacing   time.Duration `opt:"fetch-host-spacing" env:"PINGD_FETCH_HOST_SPACING" default:"1s" help:"the least time between the starts of two fetches of one origin (host and port), so that many feeds on one host are polled one after the other rather than at once (0: none; at most 10m)"`
	PollInterval       time.Duration `opt:"poll-interval" env:"PINGD_POLL_INTERVAL" default:"1h" help:"how often a source is polled when its feed gives no hint (ttl, sy:updatePeriod, Cache-Control, Expires)"`
	PollMinInterval    time.Duration `opt:"poll-min-interval" env:"PINGD_POLL_MIN_INTERVAL" default:"5m" help:"the shortest interval between two polls of a source that its feed's hints may ask for (at least 1m)"`
	PollMaxInterval    time.Duration `opt:"poll-max-interval" env:"PINGD_POLL_MAX_INTERVAL" default:"24h" help:"the longest interval between two polls of a source (only a Retry-After answer may ask for more)"`
	PingedInterval     time.Duration `opt:"pinged-interval" env:"PINGD_PINGED_INTERVAL" default:"12h" help:"how often a source that has pinged in the last week is still polled, in case a ping was lost (its pings fetch it at once; a feed's own hints may ask for longer); from --poll-min-interval to --poll-max-interval"`
	PingArchive        time.Duration `opt:"ping-archive" env:"PINGD_PING_ARCHIVE" default:"168h" help:"how long received pings are kept and served in the hourly archives /YYYY/MM/DD/HH.xml"`
	PingCommitDelay    time.Duration `opt:"ping-commit-delay" env:"PINGD_PING_COMMIT_DELAY" default:"0s" help:"0: a ping is answered once committed; above 0 (at most 100ms), once queued, and the queued pings are committed together within this delay: faster, but a crash of pingd loses the pings answered in the last moment (docs/operating.md)"`
	CNWSRetryLimit     time.Duration `opt:"cnws-retry-limit" env:"PINGD_CNWS_RETRY_LIMIT" default:"24h" help:"how long a CNWS subscriber that cannot be contacted is retried (with a last retry at the end) before it is removed; at least 24h, the CNWS draft's minimum"`
	DeliveryWorkers    int           `opt:"delivery-workers" env:"PINGD_DELIVERY_WORKERS" default:"32" help:"HTTP deliveries (webhooks, WebSub, rssCloud and CNWS notifications) sent at once"`
	DeliveriesPerHost  int           `opt:"deliveries-per-host" env:"PINGD_DELIVERIES_PER_HOST" default:"4" help:"deliveries to one receiver host at once, so that a slow receiver holds at most that many of the delivery workers"`
	RSSCloudProtocol   string        `opt:"rsscloud-protocol" env:"PINGD_RSSCLOUD_PROTOCOL" default:"http-post" help:"what the <cloud> element of node feeds and publisher snippets offers for registrations: http-post (POST /pleaseNotify), xml-rpc or soap (both on /RPC2)"`
	RelayPings         string        `opt:"relay-pings" env:"PINGD_RELAY_PINGS" help:"ping servers to forward accepted pings to, comma- or space-separated: xmlrpc:URL (weblogUpdates) or get:URL with {name}, {url} and {feed} (none: off)"`
	PingRate           float64       `opt:"ping-rate" env:"PINGD_PING_RATE" default:"1" help:"pings of one URL taken per second, in every dialect (more: 429 with Retry-After)"`
	PingBurst          int           `opt:"ping-burst" env:"PINGD_PING_BURST" default:"10" help:"pings of one URL taken at once before --ping-rate applies"`
	PingHostRate       float64       `opt:"ping-host-rate" env:"PINGD_PING_HOST_RATE" default:"10" help:"pings of URLs on one host and port taken per second, however their paths vary"`
	PingHostBurst      int           `opt:"ping-host-burst" env:"PINGD_PING_HOST_BURST" default:"100" help:"pings of URLs on one host and port taken at once before --ping-host-rate applies"`
	SubscribeRate      float64       `opt:"subscribe-rate" env:"PINGD_SUBSCRIBE_RATE" default:"10" help:"subscription requests (WebSub, GetPingd, rssCloud pleaseNotify, CNWS subscribe) taken per second from one client IP; each makes pingd call a URL the client chose"`
	SubscribeBurst     int           `opt:"subscribe-burst" env:"PINGD_SUBSCRIBE_BURST" default:"100" help:"subscription requests taken at once from one client IP before --subscribe-rate applies"`
	WhitelistNodeRate  float64       `opt:"whitelist-node-rate" env:"PINGD_WHITELIST_NODE_RATE" default:"1" help:"GetPingd whitelist requests without the node's or the admin token taken per second for one node"`
	WhitelistNodeBurst int           `opt:"whitelist-node-burst" env:"PINGD_WHITELIST_NODE_BURST" default:"20" help:"GetPingd whitelist requests without a token taken at once for one node before --whitelist-node-rate applies"`
	AdminRate          float64       `opt:"admin-rate" env:"PINGD_ADMIN_RATE" default:"20" help:"admin API requests taken per second from one client IP, counted before the token is checked"`
	AdminBurst         int           `opt:"admin-burst" env:"PINGD_ADMIN_BURST" default:"40" help:"admin API requests taken at once from one client IP before --admin-rate applies"`
	ListRate           float64       `opt:"list-rate" env:"PINGD_LIST_RATE" default:"1" help:"requests for the ping lists (changes.xml, shortChanges.xml, the hourly archives) and /opml taken per second from one client IP"`
	ListBurst          int           `opt:"list-burst" env:"PINGD_LIST_BURST" default:"20" help:"requests for the ping lists and /opml taken at once from one client IP before --list-rate applies"`
	OpenSources        string        `opt:"open-sources" env:"PINGD_OPEN_SOURCES" default:"local" help:"who may have a node created for a feed no node follows yet, by subscribing to its URL (chat or ad-hoc command): local (users of the XMPP server's own domains, see --local-domains), 1 or all (any XMPP user), 0 (nobody but PINGD_ADMINS); by default at most 20 nodes per JID per hour (--nodes-per-hour)"`
	LocalDomains       string        `opt:"local-domains" env:"PINGD_LOCAL_DOMAINS" help:"comma-separated domains of the XMPP server whose users are local for --open-sources=local; when empty, the component's parent domain (example.org for pubsub.example.org)"`
	NodesPerHour       int           `opt:"nodes-per-hour" env:"PINGD_NODES_PER_HOUR" default:"20" help:"nodes one JID may have created per hour through --open-sources (PINGD_ADMINS are not limited)"`
	AllowPrivate       bool          `opt:"allow-private" env:"PINGD_ALLOW_PRIVATE" default:"false" help:"1: fetches and callbacks may reach loopback/private addresses (local development, tests)"`
	LogLevel           string        `opt:"log-level" env:"PINGD_LOG_LEVEL" default:"info" help:"debug, info, warn or error (debug traces the XMPP stream)"`
	LogFormat          string        `opt:"log-format" env:"PINGD_LOG_FORMAT" default:"text" help:"text or json"`
	ShutdownWait       time.Duration `opt:"shutdown-timeout" env:"PINGD_SHUTDOWN_TIMEOUT" default:"15s" help:"how long a graceful shutdown waits for requests and deliveries in flight"`
	ConfigFile         string        `opt:"config" env:"PINGD_CONFIG" help:"optional config file of KEY=value lines (PINGD_* names or option names)"`

	// Each XMPP user's share of the component (component/limits.go).
	XMPPIQRate            float64       `opt:"xmpp-iq-rate" env:"PINGD_XMPP_IQ_RATE" default:"20" help:"IQ requests, chat commands and presence requests taken per second from one bare JID (more: resource-constraint, a busy chat answer); PINGD_ADMINS are not limited"`
	XMPPIQBurst           int           `opt:"xmpp-iq-burst" env:"PINGD_XMPP_IQ_BURST" default:"50" help:"requests taken at once from one bare JID before --xmpp-iq-rate applies"`
	XMPPPendingPerJID     int           `opt:"xmpp-pending-per-jid" env:"PINGD_XMPP_PENDING_PER_JID" default:"64" help:"requests of one bare JID waiting or running at once (at most 1024, the component's whole queue); beyond it they are refused at once, never waited for"`
	LookupRequestsPerHour int           `opt:"lookup-requests-per-hour" env:"PINGD_LOOKUP_REQUESTS_PER_HOUR" default:"120" help:"HTTP requests (redirects and descriptors included) one JID may have pingd make per hour to find the feeds of pages it names (chat or ad-hoc subscribe), in bursts of half that; checked before the first request"`
	LookupTimeout         time.Duration `opt:"lookup-timeout" env:"PINGD_LOOKUP_TIMEOUT" default:"10s" help:"how long one page look-up (every request of it) may take; at most 4 run at once, 2 per JID"`

	// Bounds on what strangers make pingd keep.
	ImplicitNodesPerHour         int `opt:"implicit-nodes-per-hour" env:"PINGD_IMPLICIT_NODES_PER_HOUR" default:"300" help:"new nodes one client IP may have pingd create by subscribing over HTTP (WebSub, rssCloud, CNWS) to URLs no node follows yet, per hour, an hour's worth at once (a feed reader moving its subscriptions); subscribing to a URL a node follows already is not counted; --max-implicit-nodes bounds them all"`
	MaxImplicitNodes             int `opt:"max-implicit-nodes" env:"PINGD_MAX_IMPLICIT_NODES" default:"100000" help:"at most this many nodes created for URLs someone subscribed to (HTTP or XMPP); beyond it new ones are refused (HTTP 503) until unused ones are removed; 0: none at all, pingd serves the nodes of its owners only"`
	MaxAccountSubscriptions      int `opt:"max-account-subscriptions" env:"PINGD_MAX_ACCOUNT_SUBSCRIPTIONS" default:"1000" help:"at most this many XMPP subscriptions of one account (a bare JID: all its resources, on every node, however made: XEP-0060, chat, ad-hoc, an owner's grant); beyond it new ones are refused (policy-violation, or a sentence in chat), renewals never; PINGD_ADMINS are not limited"`
	MaxNodeResources             int `opt:"max-node-resources" env:"PINGD_MAX_NODE_RESOURCES" default:"10" help:"at most this many XMPP subscriptions of one account to one node (its resources, each subscribed by its full JID); beyond it new ones are refused like those past --max-account-subscriptions"`
	MaxCallbackHostSubscriptions int `opt:"max-callback-host-subscriptions" env:"PINGD_MAX_CALLBACK_HOST_SUBSCRIPTIONS" default:"10000" help:"at most this many HTTP subscriptions (WebSub, GetPingd webhooks, rssCloud, CNWS; pending or active) with callbacks on one host, whatever the port; beyond it new ones are refused (HTTP 429), renewals never"`
}

// option describes one field of Config.
type option struct {
	name, env, def, help string
	secret               bool
	field                reflect.Value
}

func (c *Config) options() []option {
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	opts := make([]option, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		opts = append(opts, option{
			name: f.Tag.Get("opt"), env: f.Tag.Get("env"), def: f.Tag.Get("default"),
			help: f.Tag.Get("help"), secret: f.Tag.Get("secret") == "true", field: v.Field(i),
		})
	}
	return opts
}

// set parses value into the option's field.
func (o option) set(value string) error {
	switch o.field.Kind() {
	case reflect.String:
		o.field.SetString(value)
	case reflect.Bool:
		b, err := parseBool(value)
		if err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
		o.field.SetBool(b)
	case reflect.Int:
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", o.name, value)
		}
		o.field.SetInt(int64(n))
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %q is not a number like 1 or 0.5", o.name, value)
		}
		o.field.SetFloat(f)
	case reflect.Int64: // time.Duration
		d, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration like 15s or 2m", o.name, value)
		}
		o.field.SetInt(int64(d))
	default:
		return fmt.Errorf("%s: unsupported option type %s", o.name, o.field.Kind())
	}
	return nil
}

func (o option) String() string {
	switch o.field.Kind() {
	case reflect.Bool:
		if o.field.Bool() {
			return "1"
		}
		return "0"
	case reflect.Int:
		return strconv.FormatInt(o.field.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(o.field.Float(), 'g', -1, 64)
	case reflect.Int64:
		return time.Duration(o.field.Int()).String()
	}
	return o.field.String()
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (use 1 or 0)", s)
}

// boolFlag lets `--allow-private` stand alone as well as take a value.
type boolFlag struct{ o option }

func (b boolFlag) String() string     { return "" }
func (b boolFlag) Set(s string) error { return b.o.set(s) }
func (b boolFlag) IsBoolFlag() bool   { return true }

type valueFlag struct{ o option }

func (v valueFlag) String() string     { return "" }
func (v valueFlag) Set(s string) error { return v.o.set(s) }

// loadConfig builds the configuration from defaults, the config file,
// the environment and the command line of a subcommand.
func loadConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (*Config, error) {
	c := &Config{}
	opts := c.options()
	for _, o := range opts {
		if o.def != "" {
			if err := o.set(o.def); err != nil {
				return nil, err
			}
		}
		if o.field.Kind() == reflect.Bool {
			fs.Var(boolFlag{o}, o.name, "")
		} else {
			fs.Var(valueFlag{o}, o.name, "")
		}
	}
	// Flags are parsed twice: first to find --config, then again over the
	// file and environment so that flags win.
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	file := c.ConfigFile
	if file == "" {
		file = getenv("PINGD_CONFIG")
	}
	for _, o := range opts {
		if o.def != "" {
			_ = o.set(o.def)
		} else {
			o.field.SetZero()
		}
	}
	if file != "" {
		if err := c.readFile(file, opts); err != nil {
			return nil, err
		}
	}
	for _, o := range opts {
		if v, ok := lookupEnv(getenv, o.env); ok {
			if err := o.set(v); err != nil {
				return nil, fmt.Errorf("%s: %w", o.env, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.ConfigFile = file
	return c, nil
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// readFile reads KEY=value lines; KEY is a PINGD_* name or an option name.
// Blank lines and lines starting with # are ignored.
func (c *Config) readFile(path string, opts []option) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	byKey := map[string]option{}
	for _, o := range opts {
		byKey[o.env] = o
		byKey[o.name] = o
	}
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return fmt.Errorf("%s:%d: want KEY=value, got %q", path, line, text)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if uq, err := strconv.Unquote(value); err == nil {
			value = uq
		}
		o, ok := byKey[key]
		if !ok || key == "PINGD_CONFIG" || key == "config" {
			return fmt.Errorf("%s:%d: unknown option %q", path, line, key)
		}
		if err := o.set(value); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return sc.Err()
}

// Validate returns one error per problem, each on its own line.
func (c *Config) Validate() error {
	var errs []error
	if c.XMPPSecret == "" {
		errs = append(errs, errors.New("PINGD_XMPP_SECRET (--xmpp-secret) is required: the component_secret your XMPP server has for "+c.XMPPDomain))
	}
	if _, _, err := net.SplitHostPort(c.XMPPAddr); err != nil {
		errs = append(errs, fmt.Errorf("PINGD_XMPP_ADDR (--xmpp-addr) %q: want host:port", c.XMPPAddr))
	}
	if j, err := jid.Parse(c.XMPPDomain); err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
		errs = append(errs, fmt.Errorf("PINGD_XMPP_DOMAIN (--xmpp-domain) %q: want a domain JID like pubsub.example.org", c.XMPPDomain))
	}
	switch m := strings.ToLower(strings.TrimSpace(c.XMPPMulticast)); m {
	case "", "auto", "off":
	default:
		if j, err := jid.Parse(m); err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			errs = append(errs, fmt.Errorf("PINGD_XMPP_MULTICAST (--xmpp-multicast) %q: want auto, off or a service JID like multicast.example.org", c.XMPPMulticast))
		}
	}
	if _, _, err := c.SourcePolicy(); err != nil {
		errs = append(errs, err)
	}
	if err := validInstance(c.Instance); err != nil {
		errs = append(errs, err)
	}
	for _, d := range c.LocalDomainList() {
		if j, err := jid.Parse(d); err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			errs = append(errs, fmt.Errorf("PINGD_LOCAL_DOMAINS (--local-domains): %q is not a domain like example.org", d))
		}
	}
	if _, err := c.RelayTargets(); err != nil {
		errs = append(errs, fmt.Errorf("PINGD_RELAY_PINGS (--relay-pings): %w", err))
	}
	switch c.RSSCloudProtocol {
	case "http-post", "xml-rpc", "soap":
	default:
		errs = append(errs, fmt.Errorf("PINGD_RSSCLOUD_PROTOCOL (--rsscloud-protocol) %q: want http-post, xml-rpc or soap", c.RSSCloudProtocol))
	}
	if c.PingArchive < 2*time.Hour {
		errs = append(errs, fmt.Errorf("PINGD_PING_ARCHIVE (--ping-archive) %s: want at least 2h (changes.xml shows the last hour)", c.PingArchive))
	}
	if c.PingCommitDelay < 0 || c.PingCommitDelay > maxPingCommitDelay {
		errs = append(errs, fmt.Errorf("PINGD_PING_COMMIT_DELAY (--ping-commit-delay) %s: want 0 (off) up to %s", c.PingCommitDelay, maxPingCommitDelay))
	}
	if c.CNWSRetryLimit < cnws.MinRetryLimit {
		errs = append(errs, fmt.Errorf("PINGD_CNWS_RETRY_LIMIT (--cnws-retry-limit) %s: want at least 24h (the CNWS draft: \"the publisher should keep retrying for a minimum of a 24 hour period\")", c.CNWSRetryLimit))
	}
	if c.UpstreamCheck < time.Second {
		errs = append(errs, fmt.Errorf("PINGD_UPSTREAM_CHECK (--upstream-check) %s: want at least 1s", c.UpstreamCheck))
	}
	if c.UpstreamSafetyPoll < time.Minute {
		errs = append(errs, fmt.Errorf("PINGD_UPSTREAM_SAFETY_POLL (--upstream-safety-poll) %s: want at least 1m", c.UpstreamSafetyPoll))
	}
	errs = append(errs, c.validateTuning()...)
	if c.XMPPMulticastMax < 0 {
		errs = append(errs, fmt.Errorf("PINGD_XMPP_MULTICAST_MAX (--xmpp-multicast-max) %d: want 0 or more", c.XMPPMulticastMax))
	}
	if c.XMPPMulticastShare < 1 || c.XMPPMulticastShare > 100 {
		errs = append(errs, fmt.Errorf("PINGD_XMPP_MULTICAST_SHARE (--xmpp-multicast-share) %d: want a percentage from 1 to 100", c.XMPPMulticastShare))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("PINGD_HTTP_ADDR (--http-addr) %q: want host:port", c.HTTPAddr))
	}
	if _, err := httpapi.ParseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("PINGD_TRUSTED_PROXIES (--trusted-proxies): %w", err))
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("PINGD_PUBLIC_URL (--public-url) %q: want an absolute http or https URL", c.PublicURL))
	}
	if c.DB == "" {
		errs = append(errs, errors.New("PINGD_DB (--db) is empty: give a SQLite file path or a postgres:// URL"))
	}
	if c.DBMaxConns < 1 || c.DBMaxConns > maxDBConns {
		errs = append(errs, fmt.Errorf("PINGD_DB_MAX_CONNS (--db-max-conns) %d: want 1 to %d", c.DBMaxConns, maxDBConns))
	}
	for _, a := range c.AdminJIDs() {
		if j, err := jid.Parse(a); err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
			errs = append(errs, fmt.Errorf("PINGD_ADMINS (--admins): %q is not a bare JID like admin@example.org", a))
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("PINGD_LOG_LEVEL (--log-level) %q: want debug, info, warn or error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("PINGD_LOG_FORMAT (--log-format) %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// validateTuning checks the worker counts, poll intervals and rate limits.
func (c *Config) validateTuning() []error {
	var errs []error
	for _, n := range []struct {
		env, opt        string
		value, min, max int
	}{
		{"PINGD_FETCH_WORKERS", "fetch-workers", c.FetchWorkers, 1, maxWorkers},
		{"PINGD_FETCHES_PER_HOST", "fetches-per-host", c.FetchesPerHost, 1, maxWorkers},
		{"PINGD_DELIVERY_WORKERS", "delivery-workers", c.DeliveryWorkers, 1, maxWorkers},
		{"PINGD_DELIVERIES_PER_HOST", "deliveries-per-host", c.DeliveriesPerHost, 1, maxWorkers},
		{"PINGD_NODES_PER_HOUR", "nodes-per-hour", c.NodesPerHour, 1, math.MaxInt32},
		{"PINGD_IMPLICIT_NODES_PER_HOUR", "implicit-nodes-per-hour", c.ImplicitNodesPerHour, 1, math.MaxInt32},
		{"PINGD_MAX_IMPLICIT_NODES", "max-implicit-nodes", c.MaxImplicitNodes, 0, math.MaxInt32},
		{"PINGD_MAX_CALLBACK_HOST_SUBSCRIPTIONS", "max-callback-host-subscriptions", c.MaxCallbackHostSubscriptions, 1, math.MaxInt32},
		{"PINGD_XMPP_PENDING_PER_JID", "xmpp-pending-per-jid", c.XMPPPendingPerJID, 1, maxPendingPerJID},
		{"PINGD_LOOKUP_REQUESTS_PER_HOUR", "lookup-requests-per-hour", c.LookupRequestsPerHour, 1, math.MaxInt32},
		{"PINGD_MAX_ACCOUNT_SUBSCRIPTIONS", "max-account-subscriptions", c.MaxAccountSubscriptions, 1, math.MaxInt32},
		{"PINGD_MAX_NODE_RESOURCES", "max-node-resources", c.MaxNodeResources, 1, math.MaxInt32},
	} {
		if n.value < n.min || n.value > n.max {
			errs = append(errs, fmt.Errorf("%s (--%s) %d: want %d to %d", n.env, n.opt, n.value, n.min, n.max))
		}
	}
	for _, l := range []struct {
		env, opt string
		rate     float64
		burst    int
	}{
		{"PINGD_PING", "ping", c.PingRate, c.PingBurst},
		{"PINGD_PING_HOST", "ping-host", c.PingHostRate, c.PingHostBurst},
		{"PINGD_SUBSCRIBE", "subscribe", c.SubscribeRate, c.SubscribeBurst},
		{"PINGD_WHITELIST_NODE", "whitelist-node", c.WhitelistNodeRate, c.WhitelistNodeBurst},
		{"PINGD_ADMIN", "admin", c.AdminRate, c.AdminBurst},
		{"PINGD_LIST", "list", c.ListRate, c.ListBurst},
		{"PINGD_XMPP_IQ", "xmpp-iq", c.XMPPIQRate, c.XMPPIQBurst},
	} {
		if !(l.rate > 0) {
			errs = append(errs, fmt.Errorf("%s_RATE (--%s-rate) %g: want more than 0 a second", l.env, l.opt, l.rate))
		}
		if l.burst < 1 {
			errs = append(errs, fmt.Errorf("%s_BURST (--%s-burst) %d: want 1 or more", l.env, l.opt, l.burst))
		}
	}
	if c.LookupTimeout < time.Second || c.LookupTimeout > maxLookupTimeout {
		errs = append(errs, fmt.Errorf("PINGD_LOOKUP_TIMEOUT (--lookup-timeout) %s: want 1s to %s", c.LookupTimeout, maxLookupTimeout))
	}
	if c.FetchHostSpacing < 0 || c.FetchHostSpacing > maxFetchHostSpacing {
		errs = append(errs, fmt.Errorf("PINGD_FETCH_HOST_SPACING (--fetch-host-spacing) %s: want 0 to %s", c.FetchHostSpacing, maxFetchHostSpacing))
	}
	if c.PollMinInterval < minPollInterval {
		errs = append(errs, fmt.Errorf("PINGD_POLL_MIN_INTERVAL (--poll-min-interval) %s: want at least %s", c.PollMinInterval, minPollInterval))
	}
	if c.PollMaxInterval < c.PollMinInterval {
		errs = append(errs, fmt.Errorf("PINGD_POLL_MAX_INTERVAL (--poll-max-interval) %s: want at least --poll-min-interval (%s)", c.PollMaxInterval, c.PollMinInterval))
	}
	if c.PollInterval < c.PollMinInterval || c.PollInterval > c.PollMaxInterval {
		errs = append(errs, fmt.Errorf("PINGD_POLL_INTERVAL (--poll-interval) %s: want from --poll-min-interval (%s) to --poll-max-interval (%s)", c.PollInterval, c.PollMinInterval, c.PollMaxInterval))
	}
	if c.PingedInterval < c.PollMinInterval || c.PingedInterval > c.PollMaxInterval {
		errs = append(errs, fmt.Errorf("PINGD_PINGED_INTERVAL (--pinged-interval) %s: want from --poll-min-interval (%s) to --poll-max-interval (%s)", c.PingedInterval, c.PollMinInterval, c.PollMaxInterval))
	}
	return errs
}

// maxWorkers bounds the worker and per-host counts: each worker is a
// goroutine, and more than this many requests at once is a
// misconfiguration rather than a need.
const maxWorkers = 10000

// maxPendingPerJID is the component's whole queue: one JID's share of it
// cannot be more.
const maxPendingPerJID = 1024

// maxLookupTimeout bounds PINGD_LOOKUP_TIMEOUT: a look-up holds one of
// the few places look-ups have, and a user waits for its answer.
const maxLookupTimeout = 2 * time.Minute

// maxFetchHostSpacing bounds PINGD_FETCH_HOST_SPACING: beyond it a host
// with a few hundred feeds could not have them all polled daily.
const maxFetchHostSpacing = 10 * time.Minute

// minPollInterval bounds PINGD_POLL_MIN_INTERVAL: a feed polled more often
// than once a minute should ping instead.
const minPollInterval = time.Minute

// maxDBConns bounds PINGD_DB_MAX_CONNS; PostgreSQL's own default limit is
// 100 connections for everyone.
const maxDBConns = 1000

// InstanceName is the process's name in leases: --instance, or the host
// name and the HTTP listen address, which are the same across restarts
// and differ between two processes on one host (they cannot listen on one
// address).
func (c *Config) InstanceName() string {
	if c.Instance != "" {
		return c.Instance
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "/" + c.HTTPAddr
}

// validInstance checks --instance: printable ASCII without spaces, as it
// goes into log lines and the database.
func validInstance(name string) error {
	if len(name) > 200 {
		return fmt.Errorf("PINGD_INSTANCE (--instance): at most 200 characters, not %d", len(name))
	}
	for _, r := range name {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("PINGD_INSTANCE (--instance) %q: only printable ASCII without spaces", name)
		}
	}
	return nil
}

// AdminJIDs returns the configured admins, normalised to bare JIDs where
// they parse.
func (c *Config) AdminJIDs() []string {
	var out []string
	for _, a := range strings.Split(c.Admins, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if bare, err := xmppaddr.Bare(a); err == nil {
			a = bare
		}
		out = append(out, a)
	}
	return out
}

// SourcePolicy reads PINGD_OPEN_SOURCES: whether any XMPP user (all, or
// the boolean words for yes) or only local ones (local) may have nodes
// created for new feeds; the words for no: nobody.
func (c *Config) SourcePolicy() (open, local bool, err error) {
	switch v := strings.ToLower(strings.TrimSpace(c.OpenSources)); v {
	case "local":
		return false, true, nil
	case "all":
		return true, false, nil
	default:
		all, berr := parseBool(v)
		if berr != nil || v == "" {
			return false, false, fmt.Errorf("PINGD_OPEN_SOURCES (--open-sources) %q: want local, all (or 1) or 0", c.OpenSources)
		}
		return all, false, nil
	}
}

// LocalDomainList returns PINGD_LOCAL_DOMAINS as a list.
func (c *Config) LocalDomainList() []string {
	var out []string
	for d := range strings.SplitSeq(c.LocalDomains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// write prints the effective configuration as a config file, secrets
// redacted.
func (c *Config) write(w io.Writer) {
	opts := c.options()
	for _, o := range opts {
		if o.env == "PINGD_CONFIG" {
			continue
		}
		v := o.String()
		if o.secret && v != "" {
			v = "<redacted>"
		}
		fmt.Fprintf(w, "%s=%s\n", o.env, v)
	}
}

// usageOptions prints every option with its variable and default.
func usageOptions(w io.Writer) {
	c := &Config{}
	for _, o := range c.options() {
		def := o.def
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  --%-20s %-26s %s (default: %s)\n", o.name, o.env, o.help, def)
	}
}

// RelayTargets parses PINGD_RELAY_PINGS; pingd's own HTTP address and
// public host are refused as targets.
func (c *Config) RelayTargets() ([]delivery.RelayTarget, error) {
	self := []string{c.HTTPAddr}
	if u, err := url.Parse(c.PublicURL); err == nil && u.Host != "" {
		self = append(self, u.Host)
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			self = append(self, net.JoinHostPort(u.Hostname(), port))
		}
	}
	return delivery.ParseRelayTargets(c.RelayPings, self)
}

// maxPingCommitDelay bounds PINGD_PING_COMMIT_DELAY: the pings answered
// before their commit are those of the last moment, never more.
const maxPingCommitDelay = 100 * time.Millisecond
