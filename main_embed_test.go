package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The example page of docs/use-from-your-site.md, docs/examples/embed.html, in headless Chromium against a real
// server on both databases. The page is served by a second loopback server (another origin than the API's), as an
// integrator's site would serve it, under a Content-Security-Policy that allows no inline code. From the origin its
// browser keys list, it creates a short link and publishes a custom event, and both are then found through the API
// with a secret key. The same page served from a third origin shows each refusal readably (title, detail and
// origin_not_allowed) and creates nothing. The page never holds a secret key: only the two sb_pk_ keys typed in.
func TestEmbedExampleFromTwoOrigins(t *testing.T) {
	browser := chromiumPath(t)
	databases(t, func(t *testing.T, dbURL string) {
		srv := runServer(t, dbURL, "")
		site, other := examplesSite(t, srv.url), examplesSite(t, srv.url)

		out, stderr, code := cli(t, dbURL, "workspace", "create", "--name", "Acme", "--json")
		if code != 0 {
			t.Fatalf("workspace create: %s", stderr)
		}
		var ws struct{ ID string }
		mustJSON(t, out, &ws)
		secret := cliKey(t, dbURL, "--workspace", ws.ID, "--name", "server", "--scopes", "links:read,automation:write,webhooks:read")
		api := &apiClient{t: t, url: srv.url, key: secret}
		if status := api.call(http.MethodPost, "/api/v1/event-types", `{"name":"custom.page.shared","description":"A visitor shared a page.",`+
			`"schema":{"type":"object","properties":{"page":{"type":"string"}},"required":["page"]},"example":{"page":"https://www.example.com/pricing"}}`, &struct{}{}); status != http.StatusCreated {
			t.Fatalf("create the event type: %d", status)
		}
		linkKey := cliKey(t, dbURL, "--workspace", ws.ID, "--name", "share button", "--kind", "browser",
			"--origins", site.URL, "--browser-scope", "links:create", "--daily-quota", "10")
		eventKey := cliKey(t, dbURL, "--workspace", ws.ID, "--name", "share event", "--kind", "browser",
			"--origins", site.URL, "--browser-scope", "events:publish", "--target", "custom.page.shared")
		if !strings.HasPrefix(linkKey, "sb_pk_") || !strings.HasPrefix(eventKey, "sb_pk_") {
			t.Fatalf("browser keys: %q %q", linkKey, eventKey)
		}

		ctx := chromium(t, browser)
		db := filepath.Base(t.Name())

		// From the allowed origin: both calls work.
		got := useEmbed(t, ctx, site.URL, srv.url, linkKey, eventKey, "embed-allowed-"+db)
		if got.Link.State != "ok" || !strings.HasPrefix(got.Link.ID, "lnk_") || !strings.Contains(got.Link.Text, "Short link: ") {
			t.Fatalf("link from the allowed origin: %+v", got.Link)
		}
		if got.Event.State != "ok" || !strings.HasPrefix(got.Event.ID, "evt_") {
			t.Fatalf("event from the allowed origin: %+v", got.Event)
		}
		var link struct {
			DestinationURL string `json:"destination_url"`
		}
		api.call(http.MethodGet, "/api/v1/links/"+got.Link.ID, "", &link)
		if link.DestinationURL != "https://www.example.com/pricing" {
			t.Errorf("the link made by the page: %+v", link)
		}
		var events struct {
			Data []struct {
				ID   string
				Type string
				Data struct{ Page string }
			}
		}
		api.call(http.MethodGet, "/api/v1/events?type=custom.page.shared", "", &events)
		if len(events.Data) != 1 || events.Data[0].ID != got.Event.ID || events.Data[0].Data.Page != site.URL+"/embed.html" {
			t.Errorf("the event log: %+v (the page published %s)", events.Data, got.Event.ID)
		}

		// The same page from another origin: a readable problem for each call, nothing created.
		got = useEmbed(t, ctx, other.URL, srv.url, linkKey, eventKey, "embed-other-origin-"+db)
		for name, r := range map[string]embedResult{"link": got.Link, "event": got.Event} {
			if r.State != "problem" || r.Code != "origin_not_allowed" || r.ID != "" ||
				!strings.Contains(r.Text, "—") || !strings.Contains(r.Text, "(origin_not_allowed, HTTP 403)") {
				t.Errorf("%s from another origin: %+v", name, r)
			}
		}
		var links struct{ Data []struct{ ID string } }
		api.call(http.MethodGet, "/api/v1/links", "", &links)
		api.call(http.MethodGet, "/api/v1/events?type=custom.page.shared", "", &events)
		if len(links.Data) != 1 || len(events.Data) != 1 {
			t.Errorf("from another origin: %d links and %d events, want 1 and 1", len(links.Data), len(events.Data))
		}
	})
}

// embedResult is what the page shows for one call.
type embedResult struct {
	State, Code, ID, Text string
}

// embedPage is what the page shows after its form was sent, and everything it holds as text.
type embedPage struct {
	Link, Event embedResult
	// Everything is the page's HTML and the values of its inputs.
	Everything string
}

var secretKeyPattern = regexp.MustCompile(`sb_sk_[0-9A-Za-z]{38}`)

// useEmbed opens embed.html of pageOrigin, types the server's URL, the two browser keys and a link to shorten, sends
// the form, waits for both answers, saves a screenshot named shot and checks that the page holds the browser keys
// it was given and no secret key.
func useEmbed(t *testing.T, ctx context.Context, pageOrigin, server, linkKey, eventKey, shot string) embedPage {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	result := func(id string) (embedResult, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[embedResult](`(() => { const e = document.getElementById('`+id+`');
			return {State: e.dataset.state ?? '', Code: e.dataset.code ?? '', ID: e.dataset.id ?? '', Text: e.textContent}; })()`))
	}
	var got embedPage
	var png []byte
	err := chromedp.Do(ctx,
		chromedp.Navigate(pageOrigin+"/embed.html"),
		chromedp.WaitVisible(`form#embed[data-state="ready"]`),
		chromedp.SendKeys(`#server`, server),
		chromedp.SendKeys(`#link-key`, linkKey),
		chromedp.SendKeys(`#event-key`, eventKey),
		chromedp.SendKeys(`#destination`, "https://www.example.com/pricing"),
		chromedp.Click(`button[type="submit"]`),
		chromedp.WaitVisible(`form#embed[data-state="done"]`),
	)
	if err == nil {
		got.Link, err = result("link-result")
	}
	if err == nil {
		got.Event, err = result("event-result")
	}
	if err == nil {
		got.Everything, err = chromedp.Run(ctx, chromedp.Evaluate[string](
			`document.documentElement.outerHTML + [...document.querySelectorAll('input')].map(i => i.value).join(' ')`))
	}
	if err == nil {
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}
	if err != nil {
		t.Fatalf("the page of %s: %v", pageOrigin, err)
	}
	saveScreenshot(t, shot, png)
	if secretKeyPattern.MatchString(got.Everything) {
		t.Errorf("the page of %s holds a secret key", pageOrigin)
	}
	if !strings.Contains(got.Everything, linkKey) || !strings.Contains(got.Everything, eventKey) {
		t.Errorf("the page of %s does not hold the browser keys it was given", pageOrigin)
	}
	return got
}

// examplesSite serves docs/examples on a loopback port of its own, under a Content-Security-Policy that allows the
// site's own files and calls to the API at api only: no inline code, as a careful integrator's site would.
func examplesSite(t *testing.T, api string) *httptest.Server {
	files := http.FileServer(http.Dir(filepath.Join("docs", "examples")))
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src "+api)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// chromiumPath is Debian's Chromium (or CHROMIUM_PATH); without it the test is skipped, unless CI is set.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CHROMIUM_PATH")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Chromium at %s (make browser installs Debian's)", path)
		}
		t.Skipf("no Chromium at %s (make browser installs Debian's)", path)
	}
	return path
}

// chromium starts a headless Chromium for the test, with the flags of the other browser tests (never a
// downloaded browser), and closes it when the test ends.
func chromium(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-quic", true), chromedp.WindowSize(1000, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(ctx); err != nil {
		cancelAlloc()
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// saveScreenshot writes png (FullScreenshot at quality 100 is a PNG) as name.png into SCREENSHOT_DIR (default e2e/screenshots), where the browser tests keep
// theirs.
func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	dir := os.Getenv("SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("e2e", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cliKey creates a key with the CLI (key create and args) and returns its secret.
func cliKey(t *testing.T, dbURL string, args ...string) string {
	t.Helper()
	out, stderr, code := cli(t, dbURL, append(append([]string{"key", "create"}, args...), "--json")...)
	if code != 0 {
		t.Fatalf("key create %v: %s", args, stderr)
	}
	var key struct{ Secret string }
	mustJSON(t, out, &key)
	return key.Secret
}
