// Package prosodytest runs a real Prosody server (Debian's package) for tests of the XMPP provider and of the API
// over it: free loopback ports, a throwaway config, data directory and self-signed certificate, multi-user chat on
// conference.<domain>, HTTP File Upload on upload.<domain>, stream management, offline storage and blocking, and
// accounts registered with prosodyctl. Tests skip without the package, except in CI (CI set), where .ci/run installs
// it.
package prosodytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
)

// Server is a running Prosody. Start it with Start; it stops when the test ends.
type Server struct {
	t        testing.TB
	Dir      string // config, data, certificate and log (prosody.log)
	Domain   string // the virtual host: accounts are user@Domain
	c2s      int    // STARTTLS
	direct   int    // direct TLS
	http     int
	CAPEM    string // the self-signed certificate, to trust as the server's CA
	cfg      string
	cmd      *exec.Cmd
	exited   chan struct{}
	upload   bool
	blocking bool
}

// Option changes the server's setup.
type Option func(*Server)

// WithoutUpload and WithoutBlocking leave the feature off, for capability discovery tests.
func WithoutUpload() Option   { return func(p *Server) { p.upload = false } }
func WithoutBlocking() Option { return func(p *Server) { p.blocking = false } }

// Start runs a new server and waits until it accepts clients.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if _, err := exec.LookPath("prosody"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prosody is not installed (.ci/run installs Debian's package)")
		}
		t.Skip("prosody is not installed: apt-get install prosody")
	}
	p := &Server{t: t, Dir: t.TempDir(), Domain: "xmpp.test", upload: true, blocking: true}
	for _, o := range opts {
		o(p)
	}
	p.writeCert()
	t.Cleanup(p.Stop)
	// A free port is only free until somebody takes it: a test binary running beside this one can bind it between
	// freePort and Prosody's start. Prosody then runs on without that port (it logs the failure and goes on), and
	// the test would talk to whoever holds it; so the ports are drawn again.
	for attempt := 1; ; attempt++ {
		p.c2s, p.direct, p.http = pickPort(t), pickPort(t), pickPort(t)
		p.writeConfig()
		if taken := p.start(); taken == "" {
			return p
		} else if attempt == 5 {
			t.Fatalf("prosody could not open its ports in %d attempts: %s", attempt, taken)
		}
		p.Stop()
	}
}

// pickPort draws a port for the server (a test may draw a taken one).
var pickPort = freePort

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCert makes a self-signed certificate for the domain and its components; its PEM is the CA tests trust.
func (p *Server) writeCert() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: p.Domain},
		DNSNames:              []string{p.Domain, "*." + p.Domain},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	p.CAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	p.write("cert.pem", p.CAPEM)
	p.write("key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
}

// Signal sends sig to the server process (SIGSTOP makes a server that stops answering without closing connections).
func (p *Server) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *Server) write(name, content string) {
	if err := os.WriteFile(filepath.Join(p.Dir, name), []byte(content), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

func (p *Server) writeConfig() {
	modules := `"roster", "saslauth", "tls", "disco", "ping", "smacks", "carbons", "private", "vcard_legacy", "posix", "offline"`
	if p.blocking {
		modules += `, "blocklist"`
	}
	upload := ""
	if p.upload {
		upload = fmt.Sprintf("Component \"upload.%s\" \"http_file_share\"\n  http_file_share_size_limit = 1048576\n", p.Domain)
	}
	d := p.Dir
	p.cfg = filepath.Join(d, "prosody.cfg.lua")
	p.write("prosody.cfg.lua", fmt.Sprintf(`-- a throwaway server for one test
pidfile = %[1]q
data_path = %[2]q
certificates = %[3]q
run_as_root = true
daemonize = false
log = { { levels = { min = "info" }, to = "file", filename = %[4]q } }
interfaces = { "127.0.0.1" }
c2s_ports = { %[5]d }
c2s_direct_tls_ports = { %[6]d }
s2s_ports = { }
http_ports = { %[7]d }
http_interfaces = { "127.0.0.1" }
https_ports = { }
http_external_url = "http://127.0.0.1:%[7]d/"
http_default_host = "upload.%[12]s" -- requests name 127.0.0.1, not the component
admin_socket = %[8]q
modules_enabled = { %[9]s }
modules_disabled = { "s2s" }
authentication = "internal_hashed"
storage = "internal"
c2s_require_encryption = true
ssl = { certificate = %[10]q, key = %[11]q }
limits = { c2s = { rate = "10mb/s" } }
VirtualHost %[12]q
Component "conference.%[12]s" "muc"
  muc_room_locking = true
%[13]s`,
		filepath.Join(d, "prosody.pid"), mkdir(p.t, filepath.Join(d, "data")), d, filepath.Join(d, "prosody.log"),
		p.c2s, p.direct, p.http, filepath.Join(d, "admin.sock"), modules,
		filepath.Join(d, "cert.pem"), filepath.Join(d, "key.pem"), p.Domain, upload))
}

func mkdir(t testing.TB, dir string) string {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Start runs the server (again, after Stop) and waits for its client port.
func (p *Server) Start() {
	p.t.Helper()
	if taken := p.start(); taken != "" {
		p.t.Fatalf("prosody could not open its ports: %s", taken)
	}
}

// portTaken is how Prosody logs a port it could not listen on (it runs on without it).
const portTaken = "Failed to open server port"

// start is Start, returning Prosody's complaint when a port of its configuration was taken (it then runs without
// that port, and what answers there is somebody else).
func (p *Server) start() string {
	p.t.Helper()
	logFile := filepath.Join(p.Dir, "prosody.log")
	before := int64(0)
	if fi, err := os.Stat(logFile); err == nil {
		before = fi.Size()
	}
	cmd := exec.Command("prosody", "--config", p.cfg, "-F")
	cmd.Stdout, cmd.Stderr = nil, nil
	// The server dies with the test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, p.exited)
	await.Until(p.t, "prosody to listen on its client port", func() error {
		select {
		case <-p.exited:
			log, _ := os.ReadFile(filepath.Join(p.Dir, "prosody.log"))
			p.t.Fatalf("prosody exited: %s", log)
		default:
		}
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}, func(err error) bool { return err == nil })
	// The port answering proves nothing until Prosody has said how its client services went (on a taken port it
	// logs the failure, then the service "on no ports").
	var log []byte
	await.Until(p.t, "prosody to report its client ports", func() error {
		log, _ = os.ReadFile(logFile)
		if int64(len(log)) < before {
			before = 0
		}
		if !strings.Contains(string(log[before:]), "Activated service 'c2s_direct_tls'") {
			return errors.New("not yet")
		}
		return nil
	}, func(err error) bool { return err == nil })
	for line := range strings.SplitSeq(string(log[before:]), "\n") {
		if strings.Contains(line, portTaken) {
			return line
		}
	}
	return ""
}

// Stop ends the server (SIGTERM, then SIGKILL) and waits for it.
func (p *Server) Stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// Addr is the STARTTLS client port's address; DirectAddr the direct TLS one.
func (p *Server) Addr() string       { return "127.0.0.1:" + strconv.Itoa(p.c2s) }
func (p *Server) DirectAddr() string { return "127.0.0.1:" + strconv.Itoa(p.direct) }

// Register creates an account with prosodyctl and returns its address.
func (p *Server) Register(user, password string) string {
	p.t.Helper()
	out, err := exec.Command("prosodyctl", "--config", p.cfg, "register", user, p.Domain, password).CombinedOutput()
	if err != nil {
		p.t.Fatalf("prosodyctl register %s: %v: %s", user, err, out)
	}
	return user + "@" + p.Domain
}

// Config is an XMPP instance config for an account on this server.
func (p *Server) Config(account, password string) map[string]any {
	return map[string]any{"jid": account, "password": password, "server": p.Addr(), "ca_certificate": p.CAPEM}
}
