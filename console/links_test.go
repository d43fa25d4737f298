package console_test

import (
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// linksUser is a signed-in browser with a workspace of its own.
func linksUser(t *testing.T, e *env, name string) (*browser, store.MemberWorkspace) {
	t.Helper()
	b := e.browser()
	b.newUser(t, name)
	return b, b.newWorkspace(t, name+" links")
}

// createLink submits the create form of a freshly loaded links page, the nonce and CSRF token from the page.
func (b *browser) createLink(t *testing.T, form url.Values) *resp {
	t.Helper()
	p := b.get(t, "/user/links")
	p.wantStatus(t, http.StatusOK)
	form.Set("csrf_token", p.field(t, "csrf_token"))
	form.Set("nonce", p.field(t, "nonce"))
	return b.post(t, "/user/links", form)
}

func workspaceLinks(t *testing.T, db *store.DB, workspaceID string) []store.Link {
	t.Helper()
	var ls []store.Link
	if err := db.Bun().NewSelect().Model(&ls).Where("workspace_id = ?", workspaceID).Order("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	return ls
}

// eventTypes are the types of the workspace's events, oldest first.
func eventTypes(t *testing.T, db *store.DB, workspaceID string) []string {
	t.Helper()
	var types []string
	if err := db.Bun().NewSelect().Table("events").Column("type").Where("workspace_id = ?", workspaceID).
		Order("id").Scan(ctx, &types); err != nil {
		t.Fatal(err)
	}
	return types
}

// uniqueSlug is a slug no other test of the binary uses (slugs are unique per short domain).
func uniqueSlug(name string) string { return name + "-" + strings.ToLower(store.NewID("s")[20:]) }

// The create form makes the link the API would make from the same fields: slug, title, tags, UTM parameters, an
// expiry typed in the browser's zone, a click limit; the new short URL is shown with a copy button, and the list
// shows the link with its human clicks.
func TestCreateLinkForm(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "creator")
		slug := uniqueSlug("spring")
		r := b.createLink(t, url.Values{"destination_url": {"https://example.com/pricing"}, "slug": {slug},
			"title": {"Spring <sale>"}, "tags": {"newsletter, spring , "}, "utm_source": {"newsletter"},
			"utm_campaign": {"spring"}, "expires_at": {"2031-03-29T02:30"}, "tz": {"Europe/Berlin"}, "max_clicks": {"500"}})
		r.wantStatus(t, http.StatusCreated)
		short, n := r.elementText("new-link-url")
		if n != 1 || short != "https://sb.test/"+slug {
			t.Fatalf("new short URL %q (%d elements)", short, n)
		}
		if !strings.Contains(r.body, `data-copy="new-link-url"`) {
			t.Fatal("no copy button for the new short URL")
		}
		if strings.Contains(r.body, "Spring <sale>") {
			t.Fatal("the title is not escaped")
		}
		ls := workspaceLinks(t, db, ws.ID)
		if len(ls) != 1 {
			t.Fatalf("%d links stored", len(ls))
		}
		l := ls[0]
		// 02:30 on 29 March 2031 does not exist in Berlin (the clocks jump from 02:00 to 03:00): Go reads it as
		// 03:30 CEST, 01:30 UTC.
		wantExpiry := time.Date(2031, 3, 29, 1, 30, 0, 0, time.UTC)
		if l.Slug != slug || l.DestinationURL != "https://example.com/pricing" || *l.Title != "Spring <sale>" ||
			strings.Join(l.Tags, "|") != "newsletter|spring" || l.UTM["utm_source"] != "newsletter" ||
			l.UTM["utm_campaign"] != "spring" || len(l.UTM) != 2 || l.ExpiresAt == nil || !l.ExpiresAt.Equal(wantExpiry) ||
			l.MaxClicks == nil || *l.MaxClicks != 500 {
			t.Fatalf("stored link %+v (expires %v)", l, l.ExpiresAt)
		}
		if got := eventTypes(t, db, ws.ID); strings.Join(got, ",") != "link.created" {
			t.Fatalf("events %v, want one link.created", got)
		}
		row := regexp.MustCompile(`(?s)<tr data-link-id="` + l.ID + `">(.*?)</tr>`).FindString(r.body)
		if row == "" || !strings.Contains(row, "https://sb.test/"+slug) || !strings.Contains(row, "newsletter") {
			t.Fatalf("the list has no row for the link:\n%s", excerpt(r.body))
		}

		// Without a slug the service draws one.
		r = b.createLink(t, url.Values{"destination_url": {"https://example.com/other"}})
		r.wantStatus(t, http.StatusCreated)
		if short, _ := r.elementText("new-link-url"); !regexp.MustCompile(`^https://sb\.test/[A-Za-z0-9]{7}$`).MatchString(short) {
			t.Fatalf("generated short URL %q", short)
		}
	})
}

// A form the API would refuse is refused with the same rules, each message beside its field, and the form keeps
// what was typed; a form sent twice creates one link.
func TestCreateLinkFormRefused(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "refused")
		taken := uniqueSlug("taken")
		b.createLink(t, url.Values{"destination_url": {"https://example.com/"}, "slug": {taken}}).wantStatus(t, http.StatusCreated)
		long := strings.Repeat("x", 201)
		tests := []struct {
			name  string
			form  url.Values
			field string // the id of the field's input whose message must show
			text  string
		}{
			{"slug shape", url.Values{"destination_url": {"https://example.com/"}, "slug": {"-no good"}}, "link-slug", "letters, digits"},
			{"slug taken", url.Values{"destination_url": {"https://example.com/"}, "slug": {taken}}, "link-slug", "is taken"},
			{"reserved slug", url.Values{"destination_url": {"https://example.com/"}, "slug": {"user"}}, "link-slug", "reserved"},
			{"scheme", url.Values{"destination_url": {"ftp://example.com/"}}, "link-destination", "ftp"},
			{"own short domain", url.Values{"destination_url": {"https://sb.test/x"}}, "link-destination", ""},
			{"title length", url.Values{"destination_url": {"https://example.com/"}, "title": {long}}, "link-title", "200"},
			{"click limit", url.Values{"destination_url": {"https://example.com/"}, "max_clicks": {"0"}}, "link-max-clicks", "1"},
			{"click limit text", url.Values{"destination_url": {"https://example.com/"}, "max_clicks": {"many"}}, "link-max-clicks", "whole number"},
			{"expiry past", url.Values{"destination_url": {"https://example.com/"}, "expires_at": {"2020-01-01T10:00"}}, "link-expires", "future"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := b.createLink(t, tt.form)
				r.wantStatus(t, http.StatusUnprocessableEntity)
				if !strings.Contains(r.alert(), "not saved") {
					t.Fatalf("alert %q", r.alert())
				}
				m := regexp.MustCompile(`(?s)id="` + tt.field + `"[^>]*aria-invalid="true".*?<p class="field-error"[^>]*>(.*?)</p>|id="` +
					tt.field + `"[^>]*>\s*<p class="field-error"[^>]*>(.*?)</p>`).FindStringSubmatch(r.body)
				if m == nil {
					t.Fatalf("no message beside %s:\n%s", tt.field, excerpt(r.body[strings.Index(r.body, "<main"):]))
				}
				if msg := m[1] + m[2]; !strings.Contains(msg, tt.text) {
					t.Fatalf("message %q does not say %q", msg, tt.text)
				}
				for name, v := range tt.form {
					if name != "max_clicks" && name != "nonce" && name != "csrf_token" && !strings.Contains(r.body, `value="`+htmlEscape(v[0])+`"`) {
						t.Fatalf("the form lost %s=%q", name, v[0])
					}
				}
			})
		}
		if n := len(workspaceLinks(t, db, ws.ID)); n != 1 {
			t.Fatalf("%d links stored, want the first only", n)
		}

		p := b.get(t, "/user/links")
		form := url.Values{"csrf_token": {p.field(t, "csrf_token")}, "nonce": {p.field(t, "nonce")},
			"destination_url": {"https://example.com/twice"}}
		b.post(t, "/user/links", form).wantStatus(t, http.StatusCreated)
		again := b.post(t, "/user/links", form)
		again.wantStatus(t, http.StatusConflict)
		if !strings.Contains(again.alert(), "already submitted") {
			t.Fatalf("alert %q", again.alert())
		}
		if n := len(workspaceLinks(t, db, ws.ID)); n != 2 {
			t.Fatalf("%d links stored, want 2", n)
		}
	})
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// The list filters by search text, tag and archived state, pages 25 links at a time, and shows each link's human
// clicks.
func TestLinksListFilters(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "lister")
		var ids []string
		for i := range 27 {
			form := url.Values{"destination_url": {fmt.Sprintf("https://example.com/%d", i)}}
			if i%2 == 0 {
				form.Set("tags", "even")
			}
			if i == 5 {
				form.Set("title", "Needle in the list")
			}
			b.createLink(t, form).wantStatus(t, http.StatusCreated)
		}
		for _, l := range workspaceLinks(t, db, ws.ID) {
			ids = append(ids, l.ID)
		}
		rows := func(r *resp) []string {
			var out []string
			for _, m := range regexp.MustCompile(`<tr data-link-id="([^"]+)">`).FindAllStringSubmatch(r.body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		first := b.get(t, "/user/links")
		first.wantStatus(t, http.StatusOK)
		if got := rows(first); len(got) != 25 || got[0] != ids[26] {
			t.Fatalf("first page %d rows starting %v", len(got), got[:1])
		}
		next := regexp.MustCompile(`href="(/user/links\?before=[^"]+)">Older links`).FindStringSubmatch(first.body)
		if next == nil {
			t.Fatal("no link to the next page")
		}
		second := b.get(t, strings.ReplaceAll(next[1], "&amp;", "&"))
		if got := rows(second); len(got) != 2 || got[0] != ids[1] || got[1] != ids[0] {
			t.Fatalf("second page %v", got)
		}
		if got := rows(b.get(t, "/user/links?tag=even")); len(got) != 14 {
			t.Fatalf("tag filter: %d rows, want 14", len(got))
		}
		if got := rows(b.get(t, "/user/links?q=needle")); len(got) != 1 || got[0] != ids[5] {
			t.Fatalf("search: %v", got)
		}
		empty := b.get(t, "/user/links?q=nothing-like-it")
		empty.wantText(t, "No link matches these filters.")

		// Clicks recorded for a link show in its row.
		if _, err := db.Clicks.Record(ctx, []store.Click{
			{ID: store.NewID("clk"), LinkID: ids[26], ClickedAt: time.Now().UTC(), Class: store.ClickHuman, Device: "desktop", OS: "Linux", Browser: "Firefox", UserAgent: "Mozilla/5.0"},
			{ID: store.NewID("clk"), LinkID: ids[26], ClickedAt: time.Now().UTC(), Class: store.ClickBot, Device: "bot", OS: "Other", Browser: "Googlebot", UserAgent: "Googlebot"},
		}, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		row := regexp.MustCompile(`(?s)<tr data-link-id="` + ids[26] + `">.*?<td class="num">(\d+)</td>`).FindStringSubmatch(b.get(t, "/user/links").body)
		if row == nil || row[1] != "1" {
			t.Fatalf("human clicks cell %v, want 1", row)
		}
	})
}

// Edit saves the form as a partial update of every field it shows (an emptied field is cleared), archive takes a
// link out of the list and back, and delete asks first, then deletes; each change emits its event.
func TestEditArchiveDeleteLink(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "editor")
		slug := uniqueSlug("edit")
		b.createLink(t, url.Values{"destination_url": {"https://example.com/a"}, "slug": {slug}, "title": {"Old"},
			"max_clicks": {"10"}, "utm_source": {"x"}}).wantStatus(t, http.StatusCreated)
		l := workspaceLinks(t, db, ws.ID)[0]
		edit := b.get(t, "/user/links/"+l.ID+"/edit")
		edit.wantStatus(t, http.StatusOK)
		if edit.field(t, "title") != "Old" || edit.field(t, "max_clicks") != "10" || edit.field(t, "utm_source") != "x" {
			t.Fatal("the edit form does not show the link's state")
		}
		form := url.Values{"csrf_token": {edit.field(t, "csrf_token")}, "tz": {edit.field(t, "tz")},
			"destination_url": {"https://example.com/b"}, "slug": {slug}, "title": {"New"}, "tags": {"a,b"},
			"max_clicks": {""}, "utm_source": {""}, "utm_medium": {"email"}}
		b.post(t, "/user/links/"+l.ID+"/edit", form).wantRedirect(t, "/user/links/"+l.ID+"?saved=1")
		got, err := db.Links.Get(ctx, ws.ID, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DestinationURL != "https://example.com/b" || *got.Title != "New" || got.MaxClicks != nil ||
			len(got.UTM) != 1 || got.UTM["utm_medium"] != "email" || strings.Join(got.Tags, ",") != "a,b" {
			t.Fatalf("after the edit: %+v", got)
		}
		form.Set("slug", "")
		bad := b.post(t, "/user/links/"+l.ID+"/edit", form)
		bad.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(bad.alert(), "not saved") {
			t.Fatalf("alert %q", bad.alert())
		}

		csrf := b.csrf(t)
		b.post(t, "/user/links/"+l.ID+"/archive", url.Values{"csrf_token": {csrf}, "archived": {"1"}}).
			wantRedirect(t, "/user/links?archived="+l.ID)
		list := b.get(t, "/user/links")
		if strings.Contains(list.body, `data-link-id="`+l.ID+`"`) {
			t.Fatal("an archived link is listed")
		}
		if !strings.Contains(b.get(t, "/user/links?archived=1").body, `data-link-id="`+l.ID+`"`) {
			t.Fatal("the archived link is not among the archived")
		}
		b.post(t, "/user/links/"+l.ID+"/archive", url.Values{"csrf_token": {csrf}, "archived": {"0"}}).wantStatus(t, http.StatusSeeOther)

		confirm := b.get(t, "/user/links/"+l.ID+"/delete")
		confirm.wantStatus(t, http.StatusOK)
		confirm.wantText(t, "Delete https://sb.test/"+slug+"?")
		b.post(t, "/user/links/"+l.ID+"/delete", url.Values{"csrf_token": {csrf}}).wantRedirect(t, "/user/links?deleted=1")
		if _, err := db.Links.Get(ctx, ws.ID, l.ID); err == nil {
			t.Fatal("the link was not deleted")
		}
		want := "link.created,link.updated,link.updated,link.updated,link.deleted"
		if got := strings.Join(eventTypes(t, db, ws.ID), ","); got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
		b.get(t, "/user/links/"+l.ID).wantStatus(t, http.StatusNotFound)
	})
}

// A link's page draws its clicks in the browser's zone as an SVG bar chart of humans and bots, breaks them down by
// dimension and lists the latest ones, never with an address.
func TestLinkPage(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "viewer")
		b.createLink(t, url.Values{"destination_url": {"https://example.com/a"}}).wantStatus(t, http.StatusCreated)
		l := workspaceLinks(t, db, ws.ID)[0]
		empty := b.get(t, "/user/links/"+l.ID)
		empty.wantStatus(t, http.StatusOK)
		empty.wantText(t, "No clicks in this period yet")
		empty.wantText(t, "Nobody has clicked yet")

		de, ref, prefix := "DE", "news.example.org", "203.0.113.0/24"
		now := time.Now().UTC()
		var batch []store.Click
		for i := range 3 {
			batch = append(batch, store.Click{ID: store.NewID("clk"), LinkID: l.ID, ClickedAt: now.Add(-time.Duration(i) * time.Hour),
				Class: store.ClickHuman, Country: &de, ReferrerHost: &ref, Device: "mobile", OS: "iOS", Browser: "Safari",
				UserAgent: "Mozilla/5.0 (iPhone)", IPPrefix: &prefix})
		}
		batch = append(batch, store.Click{ID: store.NewID("clk"), LinkID: l.ID, ClickedAt: now, Class: store.ClickBot,
			Device: "bot", OS: "Other", Browser: "Googlebot", UserAgent: "Googlebot/2.1", IPPrefix: &prefix})
		if _, err := db.Clicks.Record(ctx, batch, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, interval := range []string{"hour", "day", "week", "month"} {
			r := b.get(t, "/user/links/"+l.ID+"?interval="+interval+"&tz=America/New_York")
			r.wantStatus(t, http.StatusOK)
			if got, _ := r.elementText("total-humans"); got != "3" {
				t.Fatalf("%s: human total %q", interval, got)
			}
			if got, _ := r.elementText("total-bots"); got != "1" {
				t.Fatalf("%s: bot total %q", interval, got)
			}
			if !strings.Contains(r.body, `<svg class="chart"`) || !strings.Contains(r.body, `class="bar-lower"`) {
				t.Fatalf("%s: no bars drawn", interval)
			}
			r.wantText(t, "Times in America/New_York")
			if r.selected("interval") != interval {
				t.Fatalf("selected interval %q, want %s", r.selected("interval"), interval)
			}
		}
		r := b.get(t, "/user/links/"+l.ID+"?interval=hour&tz=Asia/Tokyo")
		hour := now.In(mustZone(t, "Asia/Tokyo")).Truncate(time.Hour)
		if !strings.Contains(r.body, "<title>"+hour.Format("Mon 2 Jan 15:04")+": ") {
			t.Fatalf("no bar titled with the current hour in Tokyo (%s)", hour.Format("Mon 2 Jan 15:04"))
		}
		for _, want := range []string{"Countries", "DE", "news.example.org", "mobile", "Safari", "iOS", "Googlebot"} {
			r.wantText(t, want)
		}
		latest := regexp.MustCompile(`(?s)<table[^>]*id="latest-clicks".*?</table>`).FindString(r.body)
		if strings.Count(latest, `class="badge class-human"`) != 3 || strings.Count(latest, `class="badge class-bot"`) != 1 {
			t.Fatalf("latest clicks: %q", latest)
		}
		r.wantNoText(t, "203.0.113")
		// A zone the page cannot read is UTC.
		b.get(t, "/user/links/"+l.ID+"?tz=Mars/Olympus").wantText(t, "Times in UTC")
	})
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// The QR code of a link encodes its short URL: a PNG that a decoder reads back, and an SVG; ?download=1 names the
// file after the slug.
func TestLinkQRCode(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "qr")
		slug := uniqueSlug("qr")
		b.createLink(t, url.Values{"destination_url": {"https://example.com/a"}, "slug": {slug}}).wantStatus(t, http.StatusCreated)
		l := workspaceLinks(t, db, ws.ID)[0]

		p := b.get(t, "/user/links/"+l.ID+"/qr.png?download=1")
		p.wantStatus(t, http.StatusOK)
		if p.Header.Get("Content-Type") != "image/png" ||
			p.Header.Get("Content-Disposition") != `attachment; filename="qr-`+slug+`.png"` {
			t.Fatalf("PNG headers %v", p.Header)
		}
		img, err := png.Decode(strings.NewReader(p.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeQR(t, img); got != "https://sb.test/"+slug {
			t.Fatalf("the PNG reads %q", got)
		}

		s := b.get(t, "/user/links/"+l.ID+"/qr.svg")
		s.wantStatus(t, http.StatusOK)
		if s.Header.Get("Content-Type") != "image/svg+xml" || s.Header.Get("Content-Disposition") != "" ||
			!strings.Contains(s.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("SVG headers %v", s.Header)
		}
		var doc struct {
			XMLName xml.Name `xml:"svg"`
			ViewBox string   `xml:"viewBox,attr"`
			Title   string   `xml:"title"`
			Path    struct {
				D string `xml:"d,attr"`
			} `xml:"path"`
		}
		if err := xml.Unmarshal([]byte(s.body), &doc); err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		if doc.Title != "QR code of https://sb.test/"+slug || !strings.HasPrefix(doc.Path.D, "M4 4h7v1h-7z") {
			t.Fatalf("SVG title %q, path starting %.40q (want the finder pattern's top row at the quiet zone)", doc.Title, doc.Path.D)
		}
		if got := decodeQR(t, rasterSVG(t, doc.ViewBox, doc.Path.D)); got != "https://sb.test/"+slug {
			t.Fatalf("the SVG reads %q", got)
		}
	})
}

// decodeQR reads the QR code of an image.
func decodeQR(t *testing.T, img image.Image) string {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("no QR code read: %v", err)
	}
	return res.GetText()
}

// rasterSVG draws the SVG's path of unit rectangles ("Mx yhNv1h-Nz") at 4 pixels a unit.
func rasterSVG(t *testing.T, viewBox, d string) image.Image {
	t.Helper()
	var side int
	if _, err := fmt.Sscanf(viewBox, "0 0 %d %d", &side, &side); err != nil {
		t.Fatalf("viewBox %q: %v", viewBox, err)
	}
	const scale = 4
	img := image.NewGray(image.Rect(0, 0, side*scale, side*scale))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	for _, m := range regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-\d+z`).FindAllStringSubmatch(d, -1) {
		var x, y, w int
		fmt.Sscan(m[1], &x)
		fmt.Sscan(m[2], &y)
		fmt.Sscan(m[3], &w)
		for py := y * scale; py < (y+1)*scale; py++ {
			for px := x * scale; px < (x+w)*scale; px++ {
				img.Pix[py*img.Stride+px] = 0
			}
		}
	}
	return img
}

// Another workspace's link is not found on any page or action, and changes nothing; forms need the session's token.
func TestLinkPagesTenantIsolation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		owner, ws := linksUser(t, e, "owner")
		owner.createLink(t, url.Values{"destination_url": {"https://example.com/a"}, "title": {"Mine"}}).wantStatus(t, http.StatusCreated)
		l := workspaceLinks(t, db, ws.ID)[0]
		other, _ := linksUser(t, e, "other")
		for _, path := range []string{"", "/edit", "/delete", "/qr.svg", "/qr.png"} {
			other.get(t, "/user/links/"+l.ID+path).wantStatus(t, http.StatusNotFound)
		}
		csrf := other.csrf(t)
		for _, path := range []string{"/edit", "/archive", "/delete"} {
			other.post(t, "/user/links/"+l.ID+path, url.Values{"csrf_token": {csrf}, "destination_url": {"https://evil.example/"},
				"slug": {"x"}, "archived": {"1"}}).wantStatus(t, http.StatusNotFound)
		}
		if strings.Contains(other.get(t, "/user/links").body, l.ID) {
			t.Fatal("another workspace's link is listed")
		}
		// The owner's own form without its token changes nothing.
		owner.post(t, "/user/links/"+l.ID+"/delete", url.Values{}).wantStatus(t, http.StatusForbidden)
		got, err := db.Links.Get(ctx, ws.ID, l.ID)
		if err != nil || got.DestinationURL != "https://example.com/a" || got.Archived {
			t.Fatalf("the link changed: %+v, %v", got, err)
		}
		if types := eventTypes(t, db, ws.ID); len(types) != 1 {
			t.Fatalf("events %v", types)
		}
	})
}
