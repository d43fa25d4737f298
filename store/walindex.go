package store

import (
	"os"
	"syscall"
)

// walIndexHeader is the first copy of the WAL-index header at the start of an SQLite database's -shm file
// (https://www.sqlite.org/walformat.html, "The WAL-Index Header"): version, change counter, page size, last valid
// frame, database size, frame checksum, salts and header checksum. Every commit rewrites it (the counter, the last
// frame and the checksum move; a WAL restart changes the salts), so while it is unchanged nothing was committed.
type walIndexHeader [48]byte

// valid reports whether the header was read from a mapped, initialised WAL index (isInit, byte 12, is 1).
func (h walIndexHeader) valid() bool { return h[12] == 1 }

// walIndexHint maps the WAL index read-only, shared with every SQLite connection of every process. It is only ever
// a hint that lets callers skip a query: a torn or unexpected read differs from the last one and costs one
// real check, never a missed change.
type walIndexHint struct {
	mem []byte
}

// openWALIndexHint maps path+"-shm", or returns nil when that is not possible (no WAL index, not a Unix system):
// callers then check the database every time.
func openWALIndexHint(path string) *walIndexHint {
	f, err := os.Open(path + "-shm")
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < int64(len(walIndexHeader{})) {
		return nil
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	return &walIndexHint{mem: mem}
}

// header copies the current header; on a nil hint it returns an invalid header.
func (h *walIndexHint) header() walIndexHeader {
	var out walIndexHeader
	if h != nil {
		copy(out[:], h.mem)
	}
	return out
}

func (h *walIndexHint) close() {
	if h != nil {
		_ = syscall.Munmap(h.mem)
	}
}
