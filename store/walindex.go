package store

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// walIndexHeader is the first copy of the WAL-index header at the start of an SQLite database's -shm file
// (https://www.sqlite.org/walformat.html, "The WAL-Index Header"): version, change counter, page size, last valid
// frame, database size, frame checksum, salts and header checksum. Every commit rewrites it (the counter, the last
// frame and the checksum move; a WAL restart changes the salts), so while it is unchanged nothing was committed.
type walIndexHeader [48]byte

// valid reports whether the header was read from a mapped, initialised WAL index (isInit, byte 12, is 1).
func (h walIndexHeader) valid() bool { return h[12] == 1 }

// walIndex maps an SQLite database's WAL index (its -shm file) read-only, shared with every SQLite connection of
// every process. It is only ever a hint that lets callers skip a query: a torn or unexpected read differs from the
// last one and costs one real check, never a missed change.
//
// A descriptor of the -shm file is never closed while this process may hold SQLite connections to the database.
// SQLite guards the WAL index with POSIX record locks, and those belong to the process, not to a descriptor:
// closing any descriptor of the file — even one that never locked anything — drops every lock the process holds on
// it, among them the shared "dead man switch" lock that tells other processes the index is in use. Without it, the
// next process to open the database (the CLI, a backup) believes it is alone, truncates the -shm file and rebuilds
// the index under the live server's writer: disk I/O errors, "locking protocol" failures, and a documented way to
// corrupt a database. (SQLite defers closing its own descriptors for the same reason.)
//
// So there is one walIndex per database file in the process, shared by every store opened on it and by their commit
// watches, and counted: its descriptors are closed when the last of them lets go, after the last store's connections
// are closed. The *os.File values are kept, not just their numbers, because the runtime closes an unreferenced
// os.File when it collects it.
type walIndex struct {
	name string // the -shm file's absolute path

	// current is the mapping of the -shm file as it is now (nil until there is one): read without a lock on every
	// API request.
	current atomic.Pointer[walMapping]

	// Guarded by walIndexes.
	refs int
	// mappings are every mapping made, current or not: SQLite deletes the -shm file when the last connection to the
	// database closes, and a store opened afterwards maps the new one; the old one is unmapped with the rest.
	mappings []*walMapping
}

type walMapping struct {
	file *os.File
	info os.FileInfo
	mem  []byte
}

// walIndexes are the WAL indexes of this process, by the path of their -shm file.
var walIndexes = struct {
	sync.Mutex
	open map[string]*walIndex
}{open: map[string]*walIndex{}}

// acquireWALIndex returns the WAL index of the SQLite database at path for a store of this process. Call it before
// the store opens a connection, and release it after the store's connections are closed. It maps nothing yet: see
// refresh. Returns nil when the path cannot be resolved (every caller then checks the database every time).
func acquireWALIndex(path string) *walIndex {
	name, err := filepath.Abs(path + "-shm")
	if err != nil {
		return nil
	}
	walIndexes.Lock()
	defer walIndexes.Unlock()
	w := walIndexes.open[name]
	if w == nil {
		w = &walIndex{name: name}
		walIndexes.open[name] = w
	}
	w.refs++
	return w
}

// retain adds a user of the index (a commit watch, which may outlive its store); nil stays nil.
func (w *walIndex) retain() *walIndex {
	if w != nil {
		walIndexes.Lock()
		w.refs++
		walIndexes.Unlock()
	}
	return w
}

// release gives up a use of the index. The last release unmaps it and closes its descriptors: by then every store of
// this process on the database has closed its connections, so the process holds no lock on the file any more.
func (w *walIndex) release() {
	if w == nil {
		return
	}
	walIndexes.Lock()
	defer walIndexes.Unlock()
	if w.refs--; w.refs > 0 {
		return
	}
	delete(walIndexes.open, w.name)
	w.current.Store(nil)
	for _, m := range w.mappings {
		if m.mem != nil {
			_ = syscall.Munmap(m.mem)
		}
		_ = m.file.Close()
	}
	w.mappings = nil
}

// refresh maps the -shm file if it is not mapped yet, or maps it again if SQLite made a new one since. Call it only
// while a connection of the calling store is open (the file then exists and stays in place).
func (w *walIndex) refresh() {
	if w == nil {
		return
	}
	walIndexes.Lock()
	defer walIndexes.Unlock()
	now, err := os.Stat(w.name)
	if err != nil {
		return
	}
	if n := len(w.mappings); n > 0 && os.SameFile(w.mappings[n-1].info, now) {
		return // mapped already, or this file cannot be mapped
	}
	f, err := os.Open(w.name)
	if err != nil {
		return
	}
	m := &walMapping{file: f, info: now}
	w.mappings = append(w.mappings, m) // from here on closed only by the last release
	if now.Size() < int64(len(walIndexHeader{})) {
		return
	}
	if m.mem, err = syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_SHARED); err != nil {
		m.mem = nil
		return
	}
	w.current.Store(m)
}

// header copies the current header; without a mapping it returns an invalid header.
func (w *walIndex) header() walIndexHeader {
	var out walIndexHeader
	if w != nil {
		if m := w.current.Load(); m != nil {
			copy(out[:], m.mem)
		}
	}
	return out
}
