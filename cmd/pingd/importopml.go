package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/pingd/pingd/httpapi"
)

// importResult is the admin API's answer to POST /api/opml.
type importResult struct {
	Created  int `json:"created"`
	Existed  int `json:"existed"`
	Refused  int `json:"refused"`
	Outlines []struct {
		Index   int      `json:"index"`
		Folders []string `json:"folders"`
		Text    string   `json:"text"`
		XMLURL  string   `json:"xml_url"`
		Result  string   `json:"result"`
		Node    string   `json:"node"`
		Reason  string   `json:"reason"`
	} `json:"outlines"`
}

// importCommand sends an OPML subscription list to a running pingd, which
// makes an open node for each feed no node follows, and prints what
// became of each outline. It fails when any outline was refused.
func importCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	c, err := newCLI("import", args, stdout, stderr, getenv, nil)
	if err != nil {
		return err
	}
	if err := c.need(1, "import FILE.opml"); err != nil {
		return err
	}
	f, err := os.Open(c.args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	// The daemon takes bodies up to its cap; a larger file is refused
	// here, before it is sent.
	body, err := io.ReadAll(io.LimitReader(f, httpapi.DefaultMaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", c.args[0], err)
	}
	if len(body) > httpapi.DefaultMaxBodyBytes {
		return fmt.Errorf("%s is larger than %d bytes, the most pingd takes at once: split it", c.args[0], httpapi.DefaultMaxBodyBytes)
	}
	var res importResult
	if err := c.send(http.MethodPost, "/api/opml", "text/x-opml", body, &res); err != nil {
		return err
	}
	if err := c.show(res, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "#\tRESULT\tOUTLINE\tFEED\tNODE OR REASON")
		for _, o := range res.Outlines {
			name := o.Text
			if len(o.Folders) > 0 {
				name = strings.Join(o.Folders, " / ") + " / " + name
			}
			detail := o.Node
			if o.Result == "refused" {
				detail = o.Reason
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", o.Index, o.Result, oneLine(name), orDash(oneLine(o.XMLURL)), oneLine(detail))
		}
		fmt.Fprintf(w, "\n%d created, %d existed, %d refused\n", res.Created, res.Existed, res.Refused)
	}); err != nil {
		return err
	}
	if res.Refused > 0 {
		return fmt.Errorf("%d of %d outlines refused", res.Refused, len(res.Outlines))
	}
	return nil
}

// oneLine keeps a value from breaking the table: tabs and line breaks
// become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
