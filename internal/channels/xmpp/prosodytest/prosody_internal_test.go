package prosodytest

import (
	"net"
	"testing"
)

// A client port that another program took between the draw and Prosody's start is noticed (Prosody runs on without
// it, and the port still answers), and the ports are drawn again.
func TestStartDrawsAgainWhenAPortWasTaken(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	taken := other.Addr().(*net.TCPAddr).Port
	draws := 0
	pickPort = func(t testing.TB) int {
		draws++
		if draws == 1 {
			return taken
		}
		return freePort(t)
	}
	t.Cleanup(func() { pickPort = freePort })

	p := Start(t)
	if p.c2s == taken {
		t.Fatalf("the server kept the taken port %d", taken)
	}
	if draws != 6 {
		t.Errorf("%d ports drawn, want 6 (three, then three again)", draws)
	}
	p.Dial(p.Register("alice", "secret"), "secret") // the server answers on its new port: SCRAM and presence
}
