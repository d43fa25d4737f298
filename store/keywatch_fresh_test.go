package store_test

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The product's promise: a key revoked by any process is refused from the very next request on every process. So
// once Revoke has returned in one process, the next KeysVersion of every other process must differ from the version
// its cached keys were verified under — however long the revocation's announcement takes to arrive. On PostgreSQL
// the server reaches the database through a proxy that holds back whatever the database sends to a connection that
// LISTENs: the announcement is in transit, as it is for a while after every commit that NOTIFYs.
func TestKeysVersionSeesARevocationByAnotherProcessAtTheNextCall(t *testing.T) {
	run := func(t *testing.T, server, cli *store.DB, holdAnnouncements func()) {
		w := newWorkspace(t, server, "revoked elsewhere, asked at once")
		secret, k := newKey(t, server, w.ID, nil)
		before := settledVersion(t, server)
		holdAnnouncements()

		if _, err := cli.APIKeys.Revoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if got := keysVersion(t, server); got == before {
			t.Fatalf("KeysVersion still %d at the first call after another process revoked a key: a key cached "+
				"under it would still be accepted", got)
		}
		if got, err := server.APIKeys.ByHash(ctx, secret.Hash); err != nil || got.RevokedAt == nil {
			t.Errorf("the server reads %+v, %v after the revocation; want it revoked", got, err)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		u := storetest.SQLiteURL(t)
		run(t, open(t, u), open(t, u), func() {}) // a commit is seen by the next read: nothing is announced
	})
	t.Run("postgres", func(t *testing.T) {
		u := storetest.PostgresURL(t)
		p := newAnnouncementProxy(t, u)
		run(t, open(t, p.url), open(t, u), p.hold)
	})
}

// announcementProxy forwards TCP connections to PostgreSQL. Once hold is called, it stops passing on what the
// database sends to the connections on which the client has sent LISTEN (until the test ends), and nothing else.
type announcementProxy struct {
	url      string
	held     atomic.Bool
	released chan struct{}
}

func newAnnouncementProxy(t *testing.T, rawURL string) *announcementProxy {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	u.Host = ln.Addr().String()
	p := &announcementProxy{url: u.String(), released: make(chan struct{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			db, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, db)
			mu.Unlock()
			var listening atomic.Bool
			wg.Add(2)
			go func() { // client to database, watching for LISTEN
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if bytes.Contains(bytes.ToLower(buf[:n]), []byte("listen ")) {
							listening.Store(true)
						}
						if _, werr := db.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						_ = db.Close()
						return
					}
				}
			}()
			go func() { // database to client, held for a listening connection
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := db.Read(buf)
					if n > 0 {
						if listening.Load() && p.held.Load() {
							<-p.released
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						_ = c.Close()
						return
					}
				}
			}()
		}
	}()
	// Registered before the stores are opened through the proxy, so it runs after they closed.
	t.Cleanup(func() {
		close(p.released)
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// hold stops what the database sends to listening connections from reaching them.
func (p *announcementProxy) hold() { p.held.Store(true) }
