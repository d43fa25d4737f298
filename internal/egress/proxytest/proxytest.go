// Package proxytest runs real forward proxies for tests, from Debian's packages: microsocks (SOCKS5, RFC 1928 with
// the user/password method of RFC 1929) and tinyproxy (HTTP CONNECT with Basic credentials). Each runs on a loopback
// port of its own and stops when the test ends.
package proxytest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Proxy is a running proxy.
type Proxy struct {
	// URL is its scheme, host and port (socks5://127.0.0.1:41234).
	URL, Username, Password string
	log                     *syncBuffer
	logFile                 string
}

// Log is what the proxy wrote so far: microsocks's standard output, tinyproxy's log file (it logs each CONNECT).
func (p *Proxy) Log() string {
	if p.logFile != "" {
		b, _ := os.ReadFile(p.logFile)
		return string(b)
	}
	return p.log.String()
}

// SOCKS5 runs microsocks asking for user and password.
func SOCKS5(t testing.TB, user, password string) *Proxy {
	t.Helper()
	need(t, "microsocks")
	port := freePort(t)
	p := &Proxy{URL: "socks5://127.0.0.1:" + strconv.Itoa(port), Username: user, Password: password, log: &syncBuffer{}}
	start(t, p.log, "microsocks", "-i", "127.0.0.1", "-p", strconv.Itoa(port), "-u", user, "-P", password)
	waitListening(t, port)
	return p
}

// HTTP runs tinyproxy asking for Basic credentials user and password, allowing CONNECT to any port.
func HTTP(t testing.TB, user, password string) *Proxy {
	t.Helper()
	need(t, "tinyproxy")
	port := freePort(t)
	dir := t.TempDir()
	p := &Proxy{URL: "http://127.0.0.1:" + strconv.Itoa(port), Username: user, Password: password, log: &syncBuffer{},
		logFile: filepath.Join(dir, "tinyproxy.log")}
	conf := fmt.Sprintf("Port %d\nListen 127.0.0.1\nTimeout 60\nLogFile %q\nLogLevel Connect\nMaxClients 50\n"+
		"Allow 127.0.0.1\nBasicAuth %s %s\nPidFile %q\n", port, p.logFile, user, password, filepath.Join(dir, "pid"))
	path := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, p.log, "tinyproxy", "-d", "-c", path)
	waitListening(t, port)
	return p
}

func need(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (make test-go installs Debian's package)", name)
		}
		t.Skipf("%s is not installed: apt-get install %s", name, name)
	}
}

func start(t testing.TB, out *syncBuffer, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(t testing.TB, port int) {
	t.Helper()
	for range 200 {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the proxy did not listen on port %d", port)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
