package clicks

import (
	"strings"
	"sync"

	"github.com/x-way/crawlerdetect"

	"github.com/switchboard/switchboard/store"
)

// Device families.
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
	DeviceOther   = "other"
)

// Unknown is the OS or browser family of a user agent the parser does not recognise.
const Unknown = "unknown"

// Agent is what a User-Agent tells about a visit.
type Agent struct {
	// Class is human, bot, preview or monitor (head is decided by the method, not the agent).
	Class   string
	Device  string
	OS      string
	Browser string
}

// Signatures are matched against the lower-cased user agent, in the order of the lists: the first match wins. The
// names on the right are what statistics show as the browser of a non-human visit. Whether any other agent is a bot
// is decided by crawlerdetect, the Go port of the maintained Crawler-Detect list (see isCrawler); these lists keep
// the classes it does not have (previews and monitors are counted apart from bots) and the names.
var (
	// monitorAgents are uptime and synthetic monitors: they check that a link works, nobody visits.
	monitorAgents = []signature{
		{"uptimerobot", "UptimeRobot"}, {"pingdom", "Pingdom"}, {"statuscake", "StatusCake"},
		{"site24x7", "Site24x7"}, {"better uptime", "Better Stack"}, {"betterstack", "Better Stack"},
		{"datadogsynthetics", "Datadog Synthetics"}, {"datadog/synthetics", "Datadog Synthetics"}, {"checkly", "Checkly"}, {"newrelicpinger", "New Relic"},
		{"new relic synthetics", "New Relic"}, {"uptime-kuma", "Uptime Kuma"}, {"freshping", "Freshping"},
		{"hetrixtools", "HetrixTools"}, {"updown.io", "updown.io"}, {"gatus", "Gatus"}, {"oh dear", "Oh Dear"},
	}
	// previewAgents fetch a page to show a card for a link pasted in a chat or a post. A person may click the card
	// later; the fetch itself is not a visit. (Telegram's says "like TwitterBot": it is checked before Twitter.)
	previewAgents = []signature{
		{"facebookexternalhit", "Facebook"}, {"facebot", "Facebook"}, {"slackbot-linkexpanding", "Slack"},
		{"slack-imgproxy", "Slack"}, {"telegrambot", "Telegram"}, {"twitterbot", "Twitter"}, {"whatsapp", "WhatsApp"},
		{"discordbot", "Discord"}, {"linkedinbot", "LinkedIn"},
		{"skypeuripreview", "Microsoft Teams"}, {"vkshare", "VK"}, {"iframely", "Iframely"}, {"embedly", "Embedly"},
		{"redditbot", "Reddit"}, {"mastodon/", "Mastodon"}, {"bluesky cardyb", "Bluesky"},
		{"pinterestbot", "Pinterest"}, {"kakaotalk-scrap", "KakaoTalk"}, {"google-pagerenderer", "Google"},
		{"bingpreview", "Bing"}, {"outlook-iospreview", "Outlook"},
	}
	// botAgents name the crawlers, HTTP libraries, command-line tools and headless browsers statistics show most
	// often. A match is a bot even where crawlerdetect does not list the agent (PowerShell's, which starts like a
	// browser's).
	botAgents = []signature{
		{"headlesschrome", "HeadlessChrome"}, {"phantomjs", "PhantomJS"}, {"lighthouse", "Lighthouse"},
		{"googlebot", "Googlebot"}, {"bingbot", "Bingbot"}, {"applebot", "Applebot"}, {"yandex.com/bots", "YandexBot"},
		{"baiduspider", "Baiduspider"}, {"duckduckbot", "DuckDuckBot"}, {"gptbot", "GPTBot"},
		{"chatgpt-user", "ChatGPT"}, {"claudebot", "ClaudeBot"}, {"perplexitybot", "PerplexityBot"},
		{"bytespider", "Bytespider"}, {"amazonbot", "Amazonbot"}, {"ahrefsbot", "AhrefsBot"},
		{"semrushbot", "SemrushBot"}, {"mj12bot", "MJ12bot"}, {"petalbot", "PetalBot"}, {"ccbot", "CCBot"},
		{"ia_archiver", "Internet Archive"}, {"archive.org_bot", "Internet Archive"}, {"slurp", "Yahoo Slurp"},
		{"curl/", "curl"}, {"wget/", "Wget"}, {"python-requests", "python-requests"},
		{"python-urllib", "Python urllib"}, {"python-httpx", "HTTPX"}, {"aiohttp", "aiohttp"}, {"scrapy", "Scrapy"},
		{"go-http-client", "Go http client"}, {"okhttp", "OkHttp"}, {"java/", "Java"},
		{"apache-httpclient", "Apache HttpClient"}, {"axios/", "axios"}, {"node-fetch", "node-fetch"},
		{"undici", "undici"}, {"got (https://github.com/sindresorhus/got)", "got"}, {"libwww-perl", "libwww-perl"},
		{"postmanruntime", "Postman"}, {"insomnia", "Insomnia"}, {"httpie", "HTTPie"},
		{"powershell", "PowerShell"}, {"feedfetcher", "Feedfetcher"}, {"mediapartners-google", "Google AdSense"},
		{"adsbot-google", "Google Ads"}, {"google-inspectiontool", "Google"}, {"googleother", "Google"},
	}
	// peopleAgents are agents crawlerdetect lists as crawlers that Switchboard counts as people: the web view of
	// Outlook for Mac. Which clicks count as people's is a product decision, not a side effect of the list's
	// updates.
	peopleAgents = []string{"microsoft outlook"}
)

type signature struct{ token, name string }

func match(lower string, sigs []signature) (string, bool) {
	for _, s := range sigs {
		if strings.Contains(lower, s.token) {
			return s.name, true
		}
	}
	return "", false
}

// ParseAgent classifies a User-Agent and names its device, OS and browser families. An empty agent is a bot:
// every browser sends one.
func ParseAgent(ua string) Agent {
	lower := strings.ToLower(ua)
	if strings.TrimSpace(lower) == "" {
		return Agent{Class: store.ClickBot, Device: DeviceBot, OS: Unknown, Browser: Unknown}
	}
	a := Agent{Class: store.ClickHuman, OS: parseOS(lower), Browser: parseBrowser(lower)}
	if name, ok := match(lower, monitorAgents); ok {
		a.Class, a.Browser = store.ClickMonitor, name
	} else if name, ok := match(lower, previewAgents); ok {
		a.Class, a.Browser = store.ClickPreview, name
	} else if name, ok := match(lower, botAgents); ok {
		a.Class, a.Browser = store.ClickBot, name
	} else if !strings.HasPrefix(lower, "mozilla/") && !strings.HasPrefix(lower, "opera/") || isCrawler(ua, lower) {
		// Every browser of the last twenty years starts with Mozilla/ (Opera before 2013: Opera/); anything else
		// is a program, known to be one without asking the (much slower) crawler list.
		a.Class = store.ClickBot
	}
	if a.Class != store.ClickHuman {
		a.Device = DeviceBot
		return a
	}
	a.Device = device(lower, a.OS)
	return a
}

// isCrawler reports whether crawlerdetect lists the agent as a crawler, unless it is one of peopleAgents. The list
// is one regular expression of some 1,400 patterns: about 35 times the cost of the rest of ParseAgent (some 90 µs per
// agent against 3 µs, see BenchmarkParseAgent), which is why agentCache runs it once per agent.
func isCrawler(ua, lower string) bool {
	for _, p := range peopleAgents {
		if strings.Contains(lower, p) {
			return false
		}
	}
	return crawlerdetect.IsCrawler(ua)
}

func parseOS(ua string) string {
	switch {
	case strings.Contains(ua, "windows"):
		return "Windows"
	case strings.Contains(ua, "ipad"):
		return "iPadOS"
	case strings.Contains(ua, "iphone"), strings.Contains(ua, "ipod"):
		return "iOS"
	case strings.Contains(ua, "; cros "):
		return "ChromeOS"
	case strings.Contains(ua, "android"):
		return "Android"
	case strings.Contains(ua, "mac os x"), strings.Contains(ua, "macintosh"):
		return "macOS"
	case strings.Contains(ua, "linux"), strings.Contains(ua, "x11"):
		return "Linux"
	}
	return Unknown
}

// parseBrowser checks the tokens that other browsers add to Chrome's and Safari's before those: Edge, Opera,
// Samsung Internet and others all say "Chrome/" and "Safari/" too.
func parseBrowser(ua string) string {
	switch {
	case strings.Contains(ua, "edg/"), strings.Contains(ua, "edga/"), strings.Contains(ua, "edgios/"), strings.Contains(ua, "edge/"):
		return "Edge"
	case strings.Contains(ua, "opr/"), strings.Contains(ua, "opt/"), strings.Contains(ua, "opios/"), strings.HasPrefix(ua, "opera/"):
		return "Opera"
	case strings.Contains(ua, "samsungbrowser/"):
		return "Samsung Internet"
	case strings.Contains(ua, "yabrowser/"):
		return "Yandex Browser"
	case strings.Contains(ua, "vivaldi/"):
		return "Vivaldi"
	case strings.Contains(ua, "ucbrowser/"):
		return "UC Browser"
	case strings.Contains(ua, "fban/"), strings.Contains(ua, "fbav/"):
		return "Facebook"
	case strings.Contains(ua, "instagram"):
		return "Instagram"
	case strings.Contains(ua, "firefox/"), strings.Contains(ua, "fxios/"):
		return "Firefox"
	case strings.Contains(ua, "chrome/"), strings.Contains(ua, "crios/"), strings.Contains(ua, "chromium/"):
		return "Chrome"
	case strings.Contains(ua, "trident/"), strings.Contains(ua, "msie "):
		return "Internet Explorer"
	case strings.Contains(ua, "safari/"), strings.Contains(ua, "applewebkit/") && (strings.Contains(ua, "iphone") || strings.Contains(ua, "ipad")):
		return "Safari"
	}
	return Unknown
}

// device decides the device family. Android tablets drop "Mobile" from their agent; iPads since iPadOS 13 send a
// Mac's desktop agent by default, so they count as macOS desktops (no server can tell them apart).
func device(ua, os string) string {
	switch os {
	case "iPadOS":
		return DeviceTablet
	case "iOS":
		return DeviceMobile
	case "Android":
		if strings.Contains(ua, "mobile") {
			return DeviceMobile
		}
		return DeviceTablet
	case "Windows", "macOS", "Linux", "ChromeOS":
		return DeviceDesktop
	}
	if strings.Contains(ua, "mobile") {
		return DeviceMobile
	}
	return DeviceOther
}

// agentCache memoises ParseAgent: a site's visitors share a few thousand user agents, so parsing (about 0.1 ms,
// nearly all of it in crawlerdetect) is done once per agent, not per click.
type agentCache struct {
	mu sync.RWMutex
	m  map[string]Agent
}

// agentCacheSize bounds the cache; it is emptied when full (the common agents come back at once).
const agentCacheSize = 4096

func (c *agentCache) parse(ua string) Agent {
	c.mu.RLock()
	a, ok := c.m[ua]
	c.mu.RUnlock()
	if ok {
		return a
	}
	a = ParseAgent(ua)
	c.mu.Lock()
	if len(c.m) >= agentCacheSize || c.m == nil {
		c.m = make(map[string]Agent, agentCacheSize)
	}
	c.m[strings.Clone(ua)] = a
	c.mu.Unlock()
	return a
}
