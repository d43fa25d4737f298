package clicks

import (
	"testing"

	"github.com/switchboard/switchboard/store"
)

// Real user agents of current browsers, link-preview fetchers, monitors and bots.
func TestParseAgent(t *testing.T) {
	const h, b, p, m = store.ClickHuman, store.ClickBot, store.ClickPreview, store.ClickMonitor
	tests := []struct {
		name, ua string
		want     Agent
	}{
		// Browsers on desktops.
		{"Chrome on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			Agent{h, DeviceDesktop, "Windows", "Chrome"}},
		{"Edge on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
			Agent{h, DeviceDesktop, "Windows", "Edge"}},
		{"Firefox on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
			Agent{h, DeviceDesktop, "Windows", "Firefox"}},
		{"Opera on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0",
			Agent{h, DeviceDesktop, "Windows", "Opera"}},
		{"Safari on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
			Agent{h, DeviceDesktop, "macOS", "Safari"}},
		{"Chrome on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			Agent{h, DeviceDesktop, "macOS", "Chrome"}},
		{"Firefox on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.6; rv:133.0) Gecko/20100101 Firefox/133.0",
			Agent{h, DeviceDesktop, "macOS", "Firefox"}},
		{"Outlook on macOS is not ChromeOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Microsoft Outlook 16.91",
			Agent{h, DeviceDesktop, "macOS", Unknown}},
		{"Chrome on Linux", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			Agent{h, DeviceDesktop, "Linux", "Chrome"}},
		{"Firefox on Ubuntu", "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
			Agent{h, DeviceDesktop, "Linux", "Firefox"}},
		{"Chrome on ChromeOS", "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			Agent{h, DeviceDesktop, "ChromeOS", "Chrome"}},
		// iPadOS 13+ asks for desktop pages with a Mac's agent: a macOS desktop as far as anyone can tell.
		{"Safari on iPadOS (desktop agent)", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Safari/605.1.15",
			Agent{h, DeviceDesktop, "macOS", "Safari"}},

		// Phones and tablets.
		{"Safari on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
			Agent{h, DeviceMobile, "iOS", "Safari"}},
		{"Chrome on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
			Agent{h, DeviceMobile, "iOS", "Chrome"}},
		{"Firefox on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15",
			Agent{h, DeviceMobile, "iOS", "Firefox"}},
		{"Edge on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 EdgiOS/131.2903.68 Mobile/15E148 Safari/605.1.15",
			Agent{h, DeviceMobile, "iOS", "Edge"}},
		{"Facebook app on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/485.0.0.43.107;FBBV/660000000]",
			Agent{h, DeviceMobile, "iOS", "Facebook"}},
		{"Safari on iPad", "Mozilla/5.0 (iPad; CPU OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.7 Mobile/15E148 Safari/604.1",
			Agent{h, DeviceTablet, "iPadOS", "Safari"}},
		{"Chrome on Android phone", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
			Agent{h, DeviceMobile, "Android", "Chrome"}},
		{"Chrome on Android tablet", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
			Agent{h, DeviceTablet, "Android", "Chrome"}},
		{"Samsung Internet on a phone", "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
			Agent{h, DeviceMobile, "Android", "Samsung Internet"}},
		{"Samsung Internet on a tablet", "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Safari/537.36",
			Agent{h, DeviceTablet, "Android", "Samsung Internet"}},
		{"Firefox on Android", "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
			Agent{h, DeviceMobile, "Android", "Firefox"}},
		{"Opera on Android", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Mobile Safari/537.36 OPR/86.0.0.0",
			Agent{h, DeviceMobile, "Android", "Opera"}},
		{"Edge on Android", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
			Agent{h, DeviceMobile, "Android", "Edge"}},
		{"Instagram on Android", "Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/AP2A.240805.005; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/127.0.6533.103 Mobile Safari/537.36 Instagram 345.0.0.48.95 Android",
			Agent{h, DeviceMobile, "Android", "Instagram"}},
		{"a CUBOT phone is no bot", "Mozilla/5.0 (Linux; Android 11; CUBOT_X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
			Agent{h, DeviceMobile, "Android", "Chrome"}},

		// Link previews.
		{"Facebook", "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", Agent{p, DeviceBot, Unknown, "Facebook"}},
		{"iMessage", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0",
			Agent{p, DeviceBot, "macOS", "Facebook"}},
		{"Slack", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", Agent{p, DeviceBot, Unknown, "Slack"}},
		{"Twitter", "Twitterbot/1.0", Agent{p, DeviceBot, Unknown, "Twitter"}},
		{"WhatsApp", "WhatsApp/2.23.20.0", Agent{p, DeviceBot, Unknown, "WhatsApp"}},
		{"Telegram", "TelegramBot (like TwitterBot)", Agent{p, DeviceBot, Unknown, "Telegram"}},
		{"Discord", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", Agent{p, DeviceBot, Unknown, "Discord"}},
		{"LinkedIn", "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", Agent{p, DeviceBot, Unknown, "LinkedIn"}},
		{"Teams", "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com",
			Agent{p, DeviceBot, "Windows", "Microsoft Teams"}},
		{"VK", "Mozilla/5.0 (compatible; vkShare; +http://vk.com/dev/Share)", Agent{p, DeviceBot, Unknown, "VK"}},
		{"Iframely", "Iframely/1.3.1 (+https://iframely.com/docs/about) Atlassian", Agent{p, DeviceBot, Unknown, "Iframely"}},

		// Uptime monitors.
		{"UptimeRobot", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", Agent{m, DeviceBot, Unknown, "UptimeRobot"}},
		{"Pingdom", "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", Agent{m, DeviceBot, Unknown, "Pingdom"}},
		{"StatusCake", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36 StatusCake",
			Agent{m, DeviceBot, "Windows", "StatusCake"}},
		{"Site24x7", "Site24x7", Agent{m, DeviceBot, Unknown, "Site24x7"}},
		{"Better Stack", "Better Uptime Bot Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/91.0.4472.124 Safari/537.36",
			Agent{m, DeviceBot, "Windows", "Better Stack"}},
		{"Datadog", "Datadog/Synthetics", Agent{m, DeviceBot, Unknown, "Datadog Synthetics"}},
		{"Checkly", "Checkly/1.0 (https://www.checklyhq.com)", Agent{m, DeviceBot, Unknown, "Checkly"}},

		// Crawlers, scripts, headless browsers.
		{"empty", "", Agent{b, DeviceBot, Unknown, Unknown}},
		{"Googlebot", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", Agent{b, DeviceBot, Unknown, "Googlebot"}},
		{"Googlebot smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
			Agent{b, DeviceBot, "Android", "Googlebot"}},
		{"Bingbot", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", Agent{b, DeviceBot, Unknown, "Bingbot"}},
		{"GPTBot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", Agent{b, DeviceBot, Unknown, "GPTBot"}},
		{"any other bot by name", "Mozilla/5.0 (compatible; SeznamBot/4.0; +https://o-seznam.cz/)", Agent{b, DeviceBot, Unknown, Unknown}},
		{"curl", "curl/8.5.0", Agent{b, DeviceBot, Unknown, "curl"}},
		{"Wget", "Wget/1.21.4", Agent{b, DeviceBot, Unknown, "Wget"}},
		{"python-requests", "python-requests/2.32.3", Agent{b, DeviceBot, Unknown, "python-requests"}},
		{"Go", "Go-http-client/1.1", Agent{b, DeviceBot, Unknown, "Go http client"}},
		{"HeadlessChrome", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
			Agent{b, DeviceBot, "Linux", "HeadlessChrome"}},
		{"a program that is not a browser", "MyScanner/0.1", Agent{b, DeviceBot, Unknown, Unknown}},

		// Bots only the crawler list knows: they call themselves a browser and no bot.
		{"Qwant", "Mozilla/5.0 (compatible; Qwantify/2.4w; +https://www.qwant.com/)/2.4w", Agent{b, DeviceBot, Unknown, Unknown}},
		{"Netcraft", "Mozilla/5.0 (compatible; NetcraftSurveyAgent/1.0; +info@netcraft.com)", Agent{b, DeviceBot, Unknown, Unknown}},
		{"Siteimprove", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.102 Safari/537.36 SiteCheck-sitecrawl by Siteimprove.com",
			Agent{b, DeviceBot, "Windows", "Chrome"}},
		{"Google Read Aloud", "Mozilla/5.0 (Linux; Android 7.0; SM-G930V Build/NRD90M) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/59.0.3071.125 Mobile Safari/537.36 (compatible; Google-Read-Aloud; +https://support.google.com/webmasters/answer/1061943)",
			Agent{b, DeviceBot, "Android", "Chrome"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseAgent(tt.ua); got != tt.want {
				t.Errorf("ParseAgent(%q)\n = %+v\nwant %+v", tt.ua, got, tt.want)
			}
		})
	}
}

func TestAgentCacheAnswersLikeTheParserAndStaysBounded(t *testing.T) {
	var c agentCache
	ua := "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
	for range 3 {
		if got := c.parse(ua); got != ParseAgent(ua) {
			t.Fatalf("cached %+v, parser %+v", got, ParseAgent(ua))
		}
	}
	for i := range agentCacheSize + 10 {
		c.parse(ua + string(rune('a'+i%26)) + string(rune(i)))
	}
	if len(c.m) > agentCacheSize {
		t.Fatalf("cache holds %d agents, bound %d", len(c.m), agentCacheSize)
	}
}

// benchAgents are agents of every class, long and short.
var benchAgents = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14.6; rv:133.0) Gecko/20100101 Firefox/133.0",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
	"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
	"curl/8.5.0",
}

// The cost of classifying an agent seen for the first time (what a click of a new agent pays once).
func BenchmarkParseAgent(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		ParseAgent(benchAgents[i%len(benchAgents)])
	}
}

// The cost of classifying an agent seen before (what nearly every click pays).
func BenchmarkAgentCache(b *testing.B) {
	var c agentCache
	for i := 0; b.Loop(); i++ {
		c.parse(benchAgents[i%len(benchAgents)])
	}
}
