package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// errUsage marks errors after which the usage was already printed.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "-h", "--help", "-help", "help":
		usage(stdout)
		return 0
	case "version", "--version":
		fmt.Fprintf(stdout, "pingd %s\n", version)
		return 0
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = serveCommand(ctx, rest, stderr, getenv)
	case "config":
		err = configCommand(rest, stdout, stderr, getenv)
	case "migrate-db":
		err = migrateCommand(rest, stdout, stderr)
	case "node":
		err = nodeCommand(rest, stdout, stderr, getenv)
	case "whitelist":
		err = whitelistCommand(rest, stdout, stderr, getenv)
	case "subscribers":
		err = subscribersCommand(rest, stdout, stderr, getenv)
	case "ping":
		err = pingCommand(rest, stdout, stderr, getenv)
	case "status":
		err = statusCommand(rest, stdout, stderr, getenv)
	case "discover":
		err = discoverCommand(rest, stdout, stderr, getenv)
	case "import":
		err = importCommand(rest, stdout, stderr, getenv)
	default:
		fmt.Fprintf(stderr, "pingd: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "pingd: %v\n", err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `pingd %s: change notifications over XMPP pubsub and HTTP

Usage:
  pingd serve [options]    run the daemon
  pingd config [options]   print the effective configuration (secrets redacted)
  pingd migrate-db --from sqlite:PATH --to postgres://…   copy an installation to PostgreSQL
  pingd version            print the version
  pingd discover [--json] [--allow-private] URL
                           what a page or feed offers: feeds, hubs, clouds, GetPingd services

Admin commands (talk to a running pingd's admin API at --server, default
http://PINGD_HTTP_ADDR, with PINGD_ADMIN_TOKEN; --json for JSON output):
  pingd node create NAME [--source URL] [--title T] [--access open|whitelist]
  pingd node list | show NAME | delete NAME | token NAME
  pingd node set NAME [--title T] [--access open|whitelist] [--max-items N] …
                           change a node's settings (pingd node --help: all of them)
  pingd whitelist add|remove NODE JID | list NODE
  pingd subscribers NODE   every subscriber of a node, of every kind
  pingd ping URL           tell pingd that URL changed
  pingd import FILE.opml   make an open node for each feed of an OPML subscription list
  pingd status             health, XMPP connection, node count
  pingd --help             this text

Options (each also an environment variable; flags win over the variables,
the variables over the config file):
`, version)
	usageOptions(w)
}

// newFlagSet returns a flag set whose errors and help go to stderr and
// print pingd's usage.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("pingd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	return fs
}

func configCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	cfg, err := loadConfig(newFlagSet("config", stderr), args, getenv)
	if err != nil {
		return err
	}
	cfg.write(stdout)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("the configuration has problems:\n%w", err)
	}
	return nil
}
