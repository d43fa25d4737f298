# Switchboard — every command a developer or CI runs. `make ci` is the one CI entry point (.ci/run calls it).
GO      ?= go
NPM     ?= npm
PKGS    := ./...
# An execution count, not a duration: with a duration, go1.26's fuzz coordinator can report "context deadline
# exceeded" at the deadline on a busy machine without any failing input (golang/go#75804, fixed in go1.27).
FUZZTIME ?= 20000x

.PHONY: run build build-whatsapp test-whatsapp test test-go test-e2e test-sdk sdk-build image test-image test-short fuzz generate check-generated tidy-check lint-spec compat vet ci e2e-n8n bench tools browser proxy help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

run: ## start the server on embedded SQLite (data/switchboard.db) at http://localhost:8080
	$(GO) run . serve

build: ## build bin/switchboard
	$(GO) build -trimpath -o bin/switchboard .

# The WhatsApp Web provider links go.mau.fi/whatsmeow, whose go.mau.fi/libsignal is GPL-3.0: only a build with the
# whatsapp_web tag has it, and such a binary is distributed under GPL-3.0 as a whole (docs/whatsapp-web.md).
build-whatsapp: ## build bin/switchboard-whatsapp with the WhatsApp Web provider (-tags whatsapp_web; the binary is GPL-3.0 as a whole)
	$(GO) build -trimpath -tags whatsapp_web -o bin/switchboard-whatsapp .

test-whatsapp: build-whatsapp ## the WhatsApp Web binary builds; the WhatsApp Web provider's tests (SQLite and PostgreSQL), backup and migrate-data carrying its sessions, the provider list of both builds, and no go.mau.fi code in the default build
	$(GO) vet -tags whatsapp_web ./internal/channels/whatsappweb/... ./internal/app/
	$(GO) test -race -count=1 -tags whatsapp_web ./internal/channels/whatsappweb/...
	$(GO) test -count=1 -tags whatsapp_web -run '^TestNewBuildsEveryServiceOnce$$' ./internal/app/
	$(GO) test -count=1 -run '^TestNewBuildsEveryServiceOnce$$' ./internal/app/
	$(GO) test -count=1 -run '^TestMigrateDataRefusesWhatsAppWebSessionsWithoutTheProvider$$' .
	@if $(GO) list -deps . | grep -q '^go\.mau\.fi/'; then echo "the default build imports go.mau.fi (GPL-3.0) packages"; exit 1; fi

test: test-go test-whatsapp test-e2e test-sdk ## every test: Go (SQLite and PostgreSQL) of both builds (default and whatsapp_web), the browser tests and the SDKs' round trip

test-go: proxy e2e/s3rver/node_modules/.package-lock.json ## Go tests, race detector on, against SQLite and PostgreSQL (127.0.0.1:5432 or SWITCHBOARD_TEST_POSTGRES_URL), media in npm's s3rver
	$(GO) test -race -count=1 -timeout 45m $(PKGS)

test-e2e: build browser node_modules/.package-lock.json ## browser tests in headless Debian Chromium (screenshots in e2e/screenshots)
	node --test --test-reporter=spec e2e/

test-short: ## the tests without the race detector and the code generator
	$(GO) test -short -count=1 $(PKGS)

fuzz: ## each fuzz target for FUZZTIME (20000 executions, a few seconds); go test fuzzes one target per run, and failures land in testdata/fuzz
	$(GO) test -run='^$$' -fuzz='^FuzzValidSlug$$' -fuzztime=$(FUZZTIME) ./internal/links
	$(GO) test -run='^$$' -fuzz='^FuzzReadRecords$$' -fuzztime=$(FUZZTIME) ./internal/links/clicks
	$(GO) test -run='^$$' -fuzz='^FuzzLiteralAddr$$' -fuzztime=$(FUZZTIME) ./internal/egress
	$(GO) test -run='^$$' -fuzz='^FuzzCheck$$' -fuzztime=$(FUZZTIME) ./internal/apikey
	$(GO) test -run='^$$' -fuzz='^FuzzNormalizeAddress$$' -fuzztime=$(FUZZTIME) ./internal/channels/xmpp
	$(GO) test -run='^$$' -fuzz='^FuzzNormalizeAddress$$' -fuzztime=$(FUZZTIME) ./internal/channels/telegram
	$(GO) test -run='^$$' -fuzz='^FuzzNormalizeAddress$$' -fuzztime=$(FUZZTIME) ./internal/channels/whatsappcloud
	$(GO) test -run='^$$' -fuzz='^FuzzUntrustedBytes$$' -fuzztime=$(FUZZTIME) ./handlers

GENERATED := gen/ sdk/go/client.gen.go sdk/typescript/src/gen/

generate: sdk/typescript/node_modules/.package-lock.json ## regenerate gen/ and both SDKs from api/openapi.yaml (always from the repository root)
	$(GO) generate ./...
	$(GO) tool oapi-codegen -config sdk/go/oapi-codegen.yaml api/openapi.yaml
	cd sdk/typescript && $(NPM) run --silent generate >/dev/null

check-generated: generate ## fail when gen/ or an SDK differs from a fresh generation or holds untracked files
	@git diff --exit-code --stat -- $(GENERATED) || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED)); \
	  if [ -n "$$untracked" ]; then echo "untracked generated files: $$untracked"; exit 1; fi

sdk/typescript/node_modules/.package-lock.json: sdk/typescript/package.json sdk/typescript/package-lock.json
	cd sdk/typescript && $(NPM) ci --no-audit --no-fund --loglevel=error

sdk-build: sdk/typescript/node_modules/.package-lock.json ## build the TypeScript SDK (sdk/typescript/dist: ESM and types)
	cd sdk/typescript && $(NPM) run --silent build

test-sdk: sdk-build ## both SDKs' round trip against a fresh server (a key made with the CLI; models, link, webhook, message)
	sdk/roundtrip.sh

tidy-check: ## fail when go.mod/go.sum are not tidy
	$(GO) mod tidy -diff

# An S3-compatible server for the tests of media kept in a bucket.
e2e/s3rver/node_modules/.package-lock.json: e2e/s3rver/package.json e2e/s3rver/package-lock.json
	cd e2e/s3rver && $(NPM) ci --no-audit --no-fund --loglevel=error

node_modules/.package-lock.json: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error

lint-spec: node_modules/.package-lock.json ## Redocly recommended and Spectral OWASP (.spectral.yaml) rulesets: 0 errors and 0 warnings
	@out=$$(npx --no-install redocly lint api/openapi.yaml 2>&1); status=$$?; \
	  echo "$$out" | grep -v -e '^\s*$$' -e '║' -e '╔' -e '╚'; \
	  if [ $$status -ne 0 ] || echo "$$out" | grep -qi 'warning[s]\? *\(was\|were\)\? *found\|You have [0-9]* warning'; then \
	    echo "spec lint failed"; exit 1; fi
	npx --no-install spectral lint api/openapi.yaml --ruleset .spectral.yaml --fail-severity=warn

# oasdiff compares the contract with the last released one; v1.34+ is refused by this module proxy. It is installed
# with go install beside the other local tools (bin/ is not committed), named by version so a bump reinstalls it.
OASDIFF_VERSION := v1.33.0
OASDIFF := bin/tools/oasdiff-$(OASDIFF_VERSION)
RELEASED_SPEC := api/released/v1.yaml

$(OASDIFF):
	GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/oasdiff/oasdiff@$(OASDIFF_VERSION)
	mv bin/tools/oasdiff $@

# api/released/oasdiff-severity.txt lowers to INFO the two rules that flag what v1 promises may grow (oasdiff's file
# format has no comments): a response enum gaining a value (new problem codes) and an event's data gaining a type
# (new event types). Clients handle unknown codes by the problem's status and unknown event types by ignoring them.
# api/released/oasdiff-ignore-err.txt names, one line each, the bounds and formats declared after the release for the
# OWASP lint that admit exactly the values the server already accepted: an integer's format (int32) under an existing
# maximum below 2^31, a redirect type's range around its existing enum (301-308), 64 characters on an RFC 3339
# date-time (the longest is 35), `uri` on URLs the server already required to be absolute. oasdiff cannot see that a
# new bound refuses nothing valid; any other change is still reported.
compat: $(OASDIFF) ## fail on a breaking change of api/openapi.yaml against the released contract (api/released/v1.yaml)
	$(OASDIFF) breaking $(RELEASED_SPEC) api/openapi.yaml --fail-on ERR --allow-external-refs=false --color never \
	  --severity-levels api/released/oasdiff-severity.txt --err-ignore api/released/oasdiff-ignore-err.txt

vet: ## go vet
	$(GO) vet $(PKGS)

ci: tidy-check check-generated lint-spec compat vet fuzz test test-image e2e-n8n ## everything CI checks (e2e-n8n adds about 7 minutes: npm ci of n8n, then 40 s)

browser: ## install Debian's Chromium for the browser tests when missing (never a downloaded browser)
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

e2e-n8n: build ## Switchboard with a real n8n (npm, pinned in e2e/n8n): publish to a source, verify signed webhooks in a workflow
	cd e2e/n8n && { [ -x node_modules/.bin/n8n ] || npm ci --no-audit --no-fund --loglevel=error; }
	node --test e2e/n8n/run.mjs

IMAGE ?= switchboard:dev

image: ## the container image (Containerfile: FROM scratch, a static binary, CA certificates and zone data) with Debian's buildah
	@command -v buildah >/dev/null || { apt-get update -qq && apt-get install -y -qq buildah; }
	rm -rf build/image && mkdir -p build/image/etc/ssl/certs build/image/usr/share build/image/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o build/image/switchboard .
	cp /etc/ssl/certs/ca-certificates.crt build/image/etc/ssl/certs/
	cp -r /usr/share/zoneinfo build/image/usr/share/
	touch build/image/data/.keep
	buildah bud --quiet --layers=false -f Containerfile -t $(IMAGE) build/image

test-image: image ## start the binary from the image's own file system (mounted, chroot: containers cannot run here) and make the first call
	e2e/image.sh $(IMAGE)

tools: ## install the load generator used by make bench (Debian's wrk)
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

proxy: ## install Debian's HAProxy (the replica test and bench rows run three servers behind it), microsocks and tinyproxy (instances' forward proxies) when missing
	@command -v haproxy >/dev/null || { apt-get update -qq && apt-get install -y -qq haproxy; }
	@command -v microsocks >/dev/null && command -v tinyproxy >/dev/null || { apt-get update -qq && apt-get install -y -qq microsocks tinyproxy; }

bench: tools proxy ## hot paths against a bare Echo handler in the same run, then the XMPP provider through Prosody (see docs/benchmarks.md)
	$(GO) run ./bench
	$(GO) test -run '^$$' -bench '^BenchmarkProsody$$' -benchtime 2000x ./internal/channels/xmpp
	SWITCHBOARD_BENCH_XMPP=1 $(GO) test -count=1 -v -run '^TestXMPPThroughAPIMeasure$$' ./handlers | grep -e 'XMPP through' -e '^ok' -e FAIL
