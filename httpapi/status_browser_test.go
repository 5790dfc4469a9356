package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/pingd/pingd/internal/testenv"
)

// The status page in a real browser: Debian's headless Chromium loads it
// from a loopback server holding data, and the test checks the DOM it
// built, that it needed nothing from elsewhere, that the style sheet was
// not refused by the page's own Content-Security-Policy, and screenshots.
//
// PINGD_UPDATE_SCREENSHOT=1 writes the wide screenshot to
// docs/status-page.png; otherwise screenshots go to a temporary directory.

// chromiumBinary is Debian's package's launcher.
const chromiumBinary = "chromium"

// updateScreenshotEnv names the variable that makes the test rewrite the
// screenshot kept in docs/.
const updateScreenshotEnv = "PINGD_UPDATE_SCREENSHOT"

// requestLog records the paths a server was asked for.
type requestLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.paths = append(l.paths, r.URL.RequestURI())
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.paths)
}

// chromium runs the headless browser with a profile of its own and the
// given extra arguments, and returns its standard output and error. Host
// names other than the loopback address resolve to nothing, so a page that
// needed anything from elsewhere would show it.
func chromium(t *testing.T, args ...string) (stdout, stderr []byte) {
	t.Helper()
	bin := testenv.RequireProgram(t, chromiumBinary, "apt-get install -y chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(),
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--enable-logging=stderr", "--v=0",
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.Bytes(), errOut.Bytes()
}

// pageRequests returns the URLs of the requests a Chromium NetLog file
// records for pages of the given site: those whose network isolation key
// names it as the top frame's site. The browser's own background requests
// (updates, accounts) carry other keys and are left out.
func pageRequests(t *testing.T, path, site string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var netlog struct {
		Events []struct {
			Params map[string]any `json:"params"`
		} `json:"events"`
	}
	// Chromium may leave the file without its closing brackets when it
	// exits; the events written are complete.
	if err := json.Unmarshal(b, &netlog); err != nil {
		fixed := strings.TrimRight(string(b), ",\n ") + "]}"
		if err := json.Unmarshal([]byte(fixed), &netlog); err != nil {
			t.Fatalf("read the NetLog: %v", err)
		}
	}
	var out []string
	for _, ev := range netlog.Events {
		u, _ := ev.Params["url"].(string)
		key, _ := ev.Params["network_isolation_key"].(string)
		if u == "" || key == "" {
			continue
		}
		if top, _, _ := strings.Cut(key, " "); top == site {
			out = append(out, u)
		}
	}
	return out
}

func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium")
	}
	e := newEnv(t, func(c *Config) { c.Version = "dev" })
	seedStatus(t, e)
	e.ready.Store(true)
	var log requestLog
	srv := httptest.NewServer(log.wrap(e.api))
	t.Cleanup(srv.Close)
	pageURL := srv.URL + "/"
	origin, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	netLog := filepath.Join(dir, "netlog.json")
	dom, stderr := chromium(t, "--log-net-log="+netLog, "--dump-dom", pageURL)

	// The DOM Chromium built shows the nodes and the component state.
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parse the dumped DOM: %v", err)
	}
	p := &statusDoc{t: t, body: string(dom), doc: doc}
	for _, name := range []string{"news", "members", "old", "moving", "owners", hostileNode} {
		p.row("node-list", "Node", name)
	}
	if got := p.row("node-list", "Node", "news"); got["xmpp"] != "1" || got["webhook"] != "2" {
		t.Errorf("node news in the browser = %v", got)
	}
	if got := docText(p.one("component")); got != "XMPP component connected pubsub.localhost" {
		t.Errorf("component state in the browser = %q", got)
	}
	if s := docFind(doc, docByTag("script")); len(s) != 0 {
		t.Errorf("the browser's DOM has %d script elements", len(s))
	}

	// Nothing was needed from elsewhere: the page names no resource, the
	// browser asked only the page's own server, and that server only for
	// the page (and perhaps a favicon).
	for _, el := range docFind(doc, func(*html.Node) bool { return true }) {
		for _, a := range el.Attr {
			if a.Key == "src" || a.Key == "srcset" || (a.Key == "href" && el.Data != "a") {
				t.Errorf("<%s %s=%q> names a resource", el.Data, a.Key, a.Val)
			}
		}
	}
	requests := pageRequests(t, netLog, origin.Scheme+"://"+origin.Hostname())
	if !slices.Contains(requests, pageURL) {
		t.Errorf("the NetLog does not show the page's own request; it shows %q", requests)
	}
	for _, u := range requests {
		if parsed, err := url.Parse(u); err != nil || parsed.Host != origin.Host {
			t.Errorf("the page made the browser request %s", u)
		}
	}
	for _, path := range log.list() {
		if path != "/" && path != "/favicon.ico" {
			t.Errorf("the browser asked the server for %s", path)
		}
	}
	if !slices.Contains(log.list(), "/") {
		t.Error("the server never served the page")
	}
	// The page's style sheet is allowed by its Content-Security-Policy.
	for line := range strings.Lines(string(stderr)) {
		if strings.Contains(line, "Content Security Policy") {
			t.Errorf("Chromium reports a Content-Security-Policy violation: %s", line)
		}
	}

	// Screenshots, wide and phone-sized.
	wide := filepath.Join(dir, "status-page.png")
	if os.Getenv(updateScreenshotEnv) == "1" {
		wide, err = filepath.Abs(filepath.Join("..", "docs", "status-page.png"))
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, shot := range []struct {
		path          string
		width, height int
	}{
		{wide, 1280, 2300},
		{filepath.Join(dir, "status-page-phone.png"), 390, 1400},
	} {
		chromium(t, "--hide-scrollbars", "--force-device-scale-factor=1",
			"--window-size="+strconv.Itoa(shot.width)+","+strconv.Itoa(shot.height), "--screenshot="+shot.path, pageURL)
		checkScreenshot(t, shot.path, shot.width, shot.height)
	}
}

// checkScreenshot checks that path is a PNG of the window's size that
// shows more than a blank page.
func checkScreenshot(t *testing.T, path string, width, height int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("screenshot %s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), width, height)
	}
	if colors := distinctColors(img, 64); fi.Size() < 20_000 || colors < 8 {
		t.Errorf("screenshot %s looks blank: %d bytes, %d colours", path, fi.Size(), colors)
	}
	t.Logf("screenshot %s: %d bytes", path, fi.Size())
}

// distinctColors counts the colours of img, up to limit.
func distinctColors(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}
