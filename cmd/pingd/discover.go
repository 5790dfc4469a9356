package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/internal/netguard"
)

// discoverCommand runs discovery on a URL, locally (no daemon needed),
// through the same guarded client pingd serve uses.
func discoverCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("pingd discover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: pingd discover [--json] [--allow-private] URL\n\nWhat a page or feed offers: feeds, GetPingd descriptors and services, WebSub hubs, rssCloud clouds.")
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
	f, err := c.Discover(ctx, fs.Arg(0))
	if err != nil {
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

// writeFound prints what discovery found for people.
func writeFound(w io.Writer, f *discovery.Found) {
	fmt.Fprintf(w, "%s", f.URL)
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
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
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
		if s.JID != "" {
			line += fmt.Sprintf("  xmpp:%s node %q security %s", s.JID, s.Node, s.Security)
		}
		if u := s.Subscribe["SUBSCRIBE"]; u != "" {
			line += "  subscribe " + u
		}
		if len(s.Accept) > 0 {
			line += "  accepts " + strings.Join(s.Accept, ", ")
		}
		svcs = append(svcs, line)
	}
	section("GetPingd services", svcs)
	if len(f.Feeds) == 0 && len(f.Hubs) == 0 && len(f.Clouds) == 0 && len(f.Descriptors) == 0 {
		fmt.Fprintln(w, "\nNothing to subscribe to was found.")
	}
}
