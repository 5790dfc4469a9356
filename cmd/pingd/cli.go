package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The admin CLI talks to a running pingd's admin API with the same
// configuration the daemon reads (PINGD_HTTP_ADDR, PINGD_ADMIN_TOKEN, the
// config file), so on the daemon's host it needs no options at all.

// cliContext is what every admin subcommand gets.
type cliContext struct {
	server string
	token  string
	json   bool
	args   []string
	out    io.Writer
	client *http.Client
}

// newCLI parses the flags of an admin subcommand, wherever they stand
// among the positional arguments.
func newCLI(name string, args []string, stdout, stderr io.Writer, getenv func(string) string, extra func(*flag.FlagSet)) (*cliContext, error) {
	fs := newFlagSet(name, stderr)
	asJSON := fs.Bool("json", false, "")
	server := fs.String("server", "", "")
	if extra != nil {
		extra(fs)
	}
	flags, positional := splitArgs(fs, args)
	cfg, err := loadConfig(fs, flags, getenv)
	if err != nil {
		return nil, err
	}
	base := *server
	if base == "" {
		base = getenv("PINGD_SERVER")
	}
	if base == "" {
		base = "http://" + cfg.HTTPAddr
	}
	return &cliContext{
		server: strings.TrimRight(base, "/"),
		token:  cfg.AdminToken,
		json:   *asJSON,
		args:   positional,
		out:    stdout,
		client: &http.Client{Timeout: 30 * time.Second},
	}, nil
}

// splitArgs separates flags (with their values) from positional arguments.
func splitArgs(fs *flag.FlagSet, args []string) (flags, positional []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // flag.Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return flags, positional
}

// apiError is an answer of the admin API that was not a success.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return "the admin API refused the token (set PINGD_ADMIN_TOKEN or --admin-token to the daemon's admin token)"
	case http.StatusNotFound:
		// The API says `node "x": not found`; say it once, as a sentence.
		if m, ok := strings.CutSuffix(e.Message, ": not found"); ok {
			return m + " not found"
		}
		if strings.Contains(e.Message, "not found") {
			return e.Message
		}
		return e.Message + ": not found"
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// call sends a request to the admin API, with body as JSON, and decodes
// the JSON answer.
func (c *cliContext) call(method, path string, body any, out any) error {
	if body == nil {
		return c.send(method, path, "", nil, out)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.send(method, path, "application/json", b, out)
}

// send sends a request with a body of contentType (none when body is nil)
// to the admin API and decodes the JSON answer into out, if given.
func (c *cliContext) send(method, path, contentType string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.server+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach pingd at %s (is it running? set --server or PINGD_SERVER): %w", c.server, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &apiError{Status: resp.StatusCode, Message: msg}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("unexpected answer from %s%s: %w", c.server, path, err)
		}
	}
	return nil
}

// show prints v as JSON (--json) or with the table function.
func (c *cliContext) show(v any, table func(w *tabwriter.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

func (c *cliContext) need(n int, usage string) error {
	if len(c.args) != n {
		return fmt.Errorf("usage: pingd %s", usage)
	}
	return nil
}

// callPaced is call for a GET that is one of many in a row: answered
// 429 (the admin API's per-client rate limit), it waits and asks again,
// up to pacedRetries times in a row.
func (c *cliContext) callPaced(method, path string, out any) error {
	for try := 0; ; try++ {
		err := c.call(method, path, nil, out)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || try >= pacedRetries {
			return err
		}
		time.Sleep(pacedWait)
	}
}

// The pace of callPaced: the admin API's default rate gives a token every
// 50 ms.
const (
	pacedRetries = 40
	pacedWait    = 250 * time.Millisecond
)

// cliNodePage is how many nodes node list asks for at a time (the admin
// API's most).
var cliNodePage = 1000

func nodePath(node string) string { return "/api/nodes/" + url.PathEscape(node) }

type obj = map[string]any

func str(m obj, key string) string {
	switch v := m[key].(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nodeUsage is the help of `pingd node`.
const nodeUsage = `Usage: pingd node COMMAND [options]

  create NAME [--source URL] [--title T] [--access open|whitelist]
                  make a node (a source URL makes pingd follow that feed);
                  prints the node's publish token, shown only then
  list            every node
  show NAME       a node's status: subscribers, source, last and next fetch
  set NAME [--title T] [--access open|whitelist] [--max-items N]
           [--payloads true|false] [--send-last on_sub|never]
           [--notification-type normal|headline]
                  change a node's settings (only the options given)
  delete NAME     delete a node, its items and its subscriptions
  token NAME      issue a new publish token (the old one stops working)

Every command takes --server URL (default http://PINGD_HTTP_ADDR), the admin
token from PINGD_ADMIN_TOKEN or --admin-token, and --json for JSON output.
`

func nodeCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, nodeUsage)
		return errUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, nodeUsage)
		return nil
	}
	var source, title, access, payloads, sendLast, notifType string
	var maxItems int
	var nfs *flag.FlagSet
	c, err := newCLI("node", args[1:], stdout, stderr, getenv, func(fs *flag.FlagSet) {
		nfs = fs
		fs.StringVar(&source, "source", "", "")
		fs.StringVar(&title, "title", "", "")
		fs.StringVar(&access, "access", "", "")
		fs.StringVar(&access, "access-model", "", "")
		fs.IntVar(&maxItems, "max-items", 0, "")
		fs.StringVar(&payloads, "payloads", "", "")
		fs.StringVar(&sendLast, "send-last", "", "")
		fs.StringVar(&notifType, "notification-type", "", "")
		fs.Usage = func() { fmt.Fprint(stderr, nodeUsage) }
	})
	if err != nil {
		return err
	}
	switch args[0] {
	case "set":
		if err := c.need(1, "node set NAME [--title T] [--access open|whitelist] [--max-items N] [--payloads true|false] [--send-last on_sub|never] [--notification-type normal|headline]"); err != nil {
			return err
		}
		// Only the options given go into the PATCH: the rest stay as they are.
		body := obj{}
		var bad error
		nfs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "title":
				body["title"] = title
			case "access", "access-model":
				body["access_model"] = access
			case "max-items":
				body["max_items"] = maxItems
			case "payloads":
				b, err := parseBool(payloads)
				if err != nil {
					bad = fmt.Errorf("--payloads: %w", err)
				}
				body["deliver_payloads"] = b
			case "send-last":
				body["send_last_published_item"] = sendLast
			case "notification-type":
				body["notification_type"] = notifType
			case "source":
				bad = errors.New("the source of a node cannot be changed; delete the node and create it again")
			}
		})
		if bad != nil {
			return bad
		}
		if len(body) == 0 {
			return errors.New("usage: pingd node set NAME with at least one of --title, --access, --max-items, --payloads, --send-last, --notification-type")
		}
		var n obj
		if err := c.call("PATCH", nodePath(c.args[0]), body, &n); err != nil {
			return err
		}
		return c.show(n, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "node\t%s\ntitle\t%s\naccess\t%s\nmax items\t%s\npayloads\t%s\nsend last\t%s\nnotification type\t%s\n",
				str(n, "name"), orDash(str(n, "title")), str(n, "access_model"), str(n, "max_items"),
				str(n, "deliver_payloads"), orDash(str(n, "send_last_published_item")), orDash(str(n, "notification_type")))
		})
	case "create":
		if err := c.need(1, "node create NAME [--source URL] [--title TITLE] [--access open|whitelist]"); err != nil {
			return err
		}
		var n obj
		body := obj{"node": c.args[0], "source": source, "title": title, "access_model": access}
		if err := c.call("POST", "/api/nodes", body, &n); err != nil {
			return err
		}
		return c.show(n, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "node\t%s\naccess\t%s\nsource\t%s\ntoken\t%s\t(shown only now; `pingd node token %s` issues a new one)\n",
				str(n, "name"), str(n, "access_model"), orDash(str(n, "source")), str(n, "token"), str(n, "name"))
			if links, ok := n["links"].(obj); ok {
				fmt.Fprintf(w, "descriptor\t%s\n", str(links, "descriptor"))
			}
		})
	case "list":
		var list struct {
			Nodes []obj `json:"nodes"`
		}
		// The list comes a page at a time; each answer names the next.
		for path := "/api/nodes?limit=" + strconv.Itoa(cliNodePage); path != ""; {
			var page struct {
				Nodes []obj  `json:"nodes"`
				Next  string `json:"next"`
			}
			if err := c.callPaced("GET", path, &page); err != nil {
				return err
			}
			list.Nodes = append(list.Nodes, page.Nodes...)
			if page.Next != "" && !strings.HasPrefix(page.Next, "/api/nodes?") {
				return fmt.Errorf("pingd named %q as the next page of nodes", page.Next)
			}
			path = page.Next
		}
		return c.show(list, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NODE\tACCESS\tLAST SEQ\tSOURCE")
			for _, n := range list.Nodes {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", str(n, "name"), str(n, "access_model"), str(n, "last_seq"), orDash(str(n, "source")))
			}
		})
	case "show":
		if err := c.need(1, "node show NAME"); err != nil {
			return err
		}
		var st obj
		if err := c.call("GET", nodePath(c.args[0])+"/status", nil, &st); err != nil {
			return err
		}
		return c.show(st, func(w *tabwriter.Writer) { printStatus(w, st) })
	case "delete":
		if err := c.need(1, "node delete NAME"); err != nil {
			return err
		}
		if err := c.call("DELETE", nodePath(c.args[0]), nil, nil); err != nil {
			return err
		}
		return c.show(obj{"deleted": c.args[0]}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "deleted %s\n", c.args[0]) })
	case "token":
		if err := c.need(1, "node token NAME"); err != nil {
			return err
		}
		var t obj
		if err := c.call("POST", nodePath(c.args[0])+"/token", nil, &t); err != nil {
			return err
		}
		return c.show(t, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "token\t%s\t(the old token no longer works)\n", str(t, "token"))
		})
	}
	return fmt.Errorf("unknown node command %q (want create, list, show, set, delete or token; see pingd node --help)", args[0])
}

func printStatus(w *tabwriter.Writer, st obj) {
	n, _ := st["node"].(obj)
	fmt.Fprintf(w, "node\t%s\t%s\n", str(n, "name"), str(n, "title"))
	fmt.Fprintf(w, "access\t%s\n", str(n, "access_model"))
	fmt.Fprintf(w, "last seq\t%s (XMPP sent up to %s)\n", str(st, "last_seq"), str(st, "xmpp_seq"))
	if subs, ok := st["subscribers"].(obj); ok {
		kinds := make([]string, 0, len(subs))
		for k := range subs {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		parts := make([]string, 0, len(kinds))
		for _, k := range kinds {
			parts = append(parts, k+" "+str(subs, k))
		}
		fmt.Fprintf(w, "subscribers\t%s\n", orDash(strings.Join(parts, ", ")))
	}
	src, ok := st["source"].(obj)
	if !ok {
		fmt.Fprintln(w, "source\t-")
		return
	}
	fmt.Fprintf(w, "source\t%s\n", str(src, "url"))
	if m := str(src, "moved_from"); m != "" {
		fmt.Fprintf(w, "moved from\t%s\n", m)
	}
	if str(src, "gone") == "true" {
		fmt.Fprintln(w, "gone\tyes: the source answered 410 or an empty XML redirect; polling stopped")
	}
	fmt.Fprintf(w, "last ping\t%s\n", orDash(str(src, "last_ping")))
	fmt.Fprintf(w, "last fetch\t%s HTTP %s, %s bytes, %s new\n", orDash(str(src, "last_fetch")), orDash(str(src, "last_status")), str(src, "last_bytes"), str(src, "last_new_items"))
	if e := str(src, "last_error"); e != "" {
		fmt.Fprintf(w, "last error\t%s (%s in a row)\n", e, str(src, "consecutive_errors"))
	}
	fmt.Fprintf(w, "next fetch\t%s (%s)\n", orDash(str(src, "next_fetch")), orDash(str(src, "next_fetch_reason")))
}

func whitelistCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	const whitelistUsage = "usage: pingd whitelist add|remove NODE JID | list NODE"
	if len(args) == 0 {
		return errors.New(whitelistUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, whitelistUsage)
		return nil
	}
	c, err := newCLI("whitelist", args[1:], stdout, stderr, getenv, nil)
	if err != nil {
		return err
	}
	switch args[0] {
	case "add", "remove":
		if err := c.need(2, "whitelist "+args[0]+" NODE JID"); err != nil {
			return err
		}
		method := "PUT"
		if args[0] == "remove" {
			method = "DELETE"
		}
		if err := c.call(method, nodePath(c.args[0])+"/whitelist/"+url.PathEscape(c.args[1]), nil, nil); err != nil {
			return err
		}
		return c.show(obj{"node": c.args[0], "jid": c.args[1], "action": args[0]}, func(w *tabwriter.Writer) {
			verb := "added to"
			if args[0] == "remove" {
				verb = "removed from (with its subscriptions)"
			}
			fmt.Fprintf(w, "%s %s the whitelist of %s\n", c.args[1], verb, c.args[0])
		})
	case "list":
		if err := c.need(1, "whitelist list NODE"); err != nil {
			return err
		}
		var wl struct {
			Node      string `json:"node"`
			Whitelist []obj  `json:"whitelist"`
		}
		if err := c.call("GET", nodePath(c.args[0])+"/whitelist", nil, &wl); err != nil {
			return err
		}
		return c.show(wl, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "JID\tAFFILIATION")
			for _, e := range wl.Whitelist {
				fmt.Fprintf(w, "%s\t%s\n", str(e, "jid"), str(e, "affiliation"))
			}
		})
	}
	return fmt.Errorf("unknown whitelist command %q (want add, remove or list)", args[0])
}

func subscribersCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	c, err := newCLI("subscribers", args, stdout, stderr, getenv, nil)
	if err != nil {
		return err
	}
	if err := c.need(1, "subscribers NODE"); err != nil {
		return err
	}
	var subs struct {
		Subscribers []obj `json:"subscribers"`
	}
	if err := c.call("GET", nodePath(c.args[0])+"/subscribers", nil, &subs); err != nil {
		return err
	}
	return c.show(subs, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "KIND\tSUBSCRIBER\tSTATE\tSINCE\tLAST ERROR")
		for _, s := range subs.Subscribers {
			d, _ := s["delivery"].(obj)
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", str(s, "kind"), str(s, "address"), str(s, "state"), str(s, "created"), orDash(str(d, "last_error")))
		}
	})
}

func pingCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	c, err := newCLI("ping", args, stdout, stderr, getenv, nil)
	if err != nil {
		return err
	}
	if err := c.need(1, "ping URL"); err != nil {
		return err
	}
	resp, err := c.client.PostForm(c.server+"/ping", url.Values{"url": {c.args[0]}})
	if err != nil {
		return fmt.Errorf("cannot reach pingd at %s: %w", c.server, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &apiError{Status: resp.StatusCode, Message: "ping of " + c.args[0] + " refused"}
	}
	return c.show(obj{"pinged": c.args[0]}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "pinged %s: pingd fetches it and notifies its subscribers\n", c.args[0])
	})
}

func statusCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	c, err := newCLI("status", args, stdout, stderr, getenv, nil)
	if err != nil {
		return err
	}
	probe := func(path string) string {
		resp, err := c.client.Get(c.server + path)
		if err != nil {
			return "unreachable"
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return "ok"
		}
		return "failing (HTTP " + strconv.Itoa(resp.StatusCode) + ")"
	}
	st := obj{"server": c.server, "healthz": probe("/healthz"), "readyz": probe("/readyz")}
	// The status report counts the nodes (listing them would read every
	// page).
	var report struct {
		Nodes *int   `json:"nodes"`
		Error string `json:"error"`
	}
	nodesErr := c.call("GET", "/api/status", nil, &report)
	if nodesErr == nil && report.Nodes == nil {
		nodesErr = fmt.Errorf("the status report has no figures: %s", cmp.Or(report.Error, "no reason given"))
	}
	if nodesErr == nil {
		st["nodes"] = *report.Nodes
	}
	if err := c.show(st, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "pingd\t%s\n", c.server)
		fmt.Fprintf(w, "store (healthz)\t%s\n", st["healthz"])
		fmt.Fprintf(w, "XMPP component (readyz)\t%s\n", st["readyz"])
		switch {
		case nodesErr == nil:
			fmt.Fprintf(w, "nodes\t%d\n", *report.Nodes)
		case st["healthz"] == "unreachable":
			fmt.Fprintln(w, "nodes\tunknown")
		default:
			fmt.Fprintf(w, "nodes\tunknown: %v\n", nodesErr)
		}
	}); err != nil {
		return err
	}
	// The exit status is the daemon's health only, so that it serves as a
	// container health check without the admin token.
	switch st["healthz"] {
	case "ok":
		return nil
	case "unreachable":
		return fmt.Errorf("cannot reach pingd at %s (is it running? set --server or PINGD_SERVER)", c.server)
	}
	return errors.New("pingd is not healthy")
}
