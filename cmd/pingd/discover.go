package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/netguard"
)

// discoverCommand runs discovery on a URL, locally (no daemon needed),
// through the same guarded client pingd serve uses.
func discoverCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("pingd discover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: pingd discover [--json] [--allow-private] URL\n\nWhat a page or feed offers: feeds, GetPingd descriptors and services, WebSub hubs, rssCloud clouds.\nA page's chosen feed is followed too, for the push endpoints it names.")
	}
	asJSON := fs.Bool("json", false, "print JSON")
	allowPrivate := fs.Bool("allow-private", false, "allow loopback and private addresses (PINGD_ALLOW_PRIVATE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	if v := getenv("PINGD_ALLOW_PRIVATE"); v != "" && !*allowPrivate {
		b, err := parseBool(v)
		if err != nil {
			return fmt.Errorf("PINGD_ALLOW_PRIVATE: %w", err)
		}
		*allowPrivate = b
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c := &discovery.Client{
		HTTP:      netguard.NewClient(netguard.Options{AllowPrivate: *allowPrivate}),
		UserAgent: "pingd/" + version + " (discover)",
	}
	f, err := c.Follow(ctx, fs.Arg(0))
	if err != nil {
		// Name the way out: a developer trying pingd locally meets this first.
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			return fmt.Errorf("discover %s: refused: %s is %s; run with --allow-private (or PINGD_ALLOW_PRIVATE=1) for local testing",
				fs.Arg(0), refused.Addr, refused.Kind)
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(f)
	}
	writeFound(stdout, f)
	return nil
}

// writeFound prints what discovery found for people: the URL, and for a
// page the feed it stands for, followed.
func writeFound(w io.Writer, f *discovery.Found) {
	writeOne(w, f, "")
	if f.FollowError != "" {
		fmt.Fprintf(w, "\nThe chosen feed could not be read: %s\n", f.FollowError)
	}
	if f.Followed != nil {
		fmt.Fprintf(w, "\nFollowing the chosen feed:\n\n")
		writeOne(w, f.Followed, "  ")
	}
	if !offersPush(f) && (f.Followed == nil || !offersPush(f.Followed)) && len(f.Feeds) == 0 {
		fmt.Fprintln(w, "\nNothing to subscribe to was found.")
	}
}

// offersPush reports whether f names a push endpoint of any kind.
func offersPush(f *discovery.Found) bool {
	return len(f.Hubs) > 0 || len(f.Clouds) > 0 || len(f.Descriptors) > 0
}

// writeOne prints one Found, each line after indent.
func writeOne(w io.Writer, f *discovery.Found, indent string) {
	fmt.Fprintf(w, "%s%s", indent, f.URL)
	if f.FinalURL != f.URL {
		fmt.Fprintf(w, " (answered by %s)", f.FinalURL)
	}
	kind := map[string]string{"feed": "a feed", "html": "an HTML page", "other": "another kind of document"}[f.Kind]
	fmt.Fprintf(w, " is %s", kind)
	if f.ContentType != "" {
		fmt.Fprintf(w, " (%s)", f.ContentType)
	}
	fmt.Fprintln(w, ".")
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s%s:\n", indent, title)
		for _, l := range lines {
			fmt.Fprintf(w, "%s  %s\n", indent, l)
		}
	}
	var feeds []string
	for i, l := range f.Feeds {
		line := l.URL + "  " + l.Type
		if l.Title != "" {
			line += "  " + fmt.Sprintf("%q", l.Title)
		}
		if i == 0 {
			line += "  (chosen)"
		}
		feeds = append(feeds, line)
	}
	section("Feeds, best first", feeds)
	section("WebSub hubs", f.Hubs)
	if f.Self != "" {
		section("Self (topic) URL", []string{f.Self})
	}
	var clouds []string
	for _, c := range f.Clouds {
		clouds = append(clouds, fmt.Sprintf("%s:%d%s  protocol %s  procedure %q", c.Domain, c.Port, c.Path, c.Protocol, c.RegisterProcedure))
	}
	section("rssCloud clouds", clouds)
	section("GetPingd descriptors", f.Descriptors)
	var svcs []string
	for _, s := range f.Services {
		line := s.Descriptor
		if s.Priority != nil {
			line += fmt.Sprintf("  priority %d", *s.Priority)
		}
		if len(s.Types) > 0 {
			line += "  type " + strings.Join(s.Types, ", ")
		}
		if s.JID != "" {
			line += fmt.Sprintf("  xmpp:%s node %q security %s", s.JID, s.Node, s.Security)
		}
		for _, u := range s.URIs {
			line += fmt.Sprintf("  %s %s", u.Method, u.URL)
		}
		if len(s.Accept) > 0 {
			line += "  accepts " + strings.Join(s.Accept, ", ")
		}
		svcs = append(svcs, line)
	}
	section("GetPingd services, in the order a client tries them", svcs)
	var chosen []string
	for _, c := range f.Chosen {
		what := map[string]string{getpingd.ContentTypeHTTPSubscribe: "webhook", getpingd.ContentTypeXMPPSubscribe: "XMPP"}[c.Type]
		line := fmt.Sprintf("%s: %s %s", what, c.Method, c.URI)
		if c.JID != "" {
			line += fmt.Sprintf("  then xmpp:%s node %q security %s", c.JID, c.Node, c.Security)
		}
		chosen = append(chosen, line)
	}
	section("GetPingd subscriptions a client makes", chosen)
}
