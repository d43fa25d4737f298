package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is the CPU time (user and system) used so far by this process and by the PostgreSQL server's processes
// that work for the bench's database. A drain's throughput swings by a fifth from one run to the next on a shared
// two-core machine; the CPU it costs per delivery, on each side, is what a change to the dispatcher moves, and stays
// put from run to run.
type cpuUse struct {
	self, postgres time.Duration
	// seen is false when no PostgreSQL process of the database is visible (the database runs elsewhere, or it is
	// SQLite's turn).
	seen bool
}

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// readCPU reads this process's CPU time and, when database names a PostgreSQL database, the sum over the server's
// backends connected to it and its background processes (WAL writer, checkpointer, background writer), which
// write for every database. Backends of other databases — other workloads of the same server — are left out: they
// made the figure swing, even below zero. A backend that exits between two readings takes its time with it; the
// dispatcher's connections stay open for the whole drain.
func readCPU(database string) cpuUse {
	var u cpuUse
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if database == "" {
		return u
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		comm, cpu, ok := parseStat(string(b))
		if !ok || comm != "postgres" {
			continue
		}
		title, err := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
		if err != nil || !servesDatabase(string(title), database) {
			continue
		}
		u.postgres += cpu
		u.seen = true
	}
	return u
}

// postgresDatabase is the database a PostgreSQL URL names, "" for any other URL (SQLite's).
func postgresDatabase(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// servesDatabase says whether a PostgreSQL process, by its title ("postgres: [cluster: ]user database host(port)
// state" for a backend, "postgres: [cluster: ]walwriter" for a background process), works for database: a backend
// connected to it, or one of the background processes that write for every database.
func servesDatabase(title, database string) bool {
	title = strings.TrimRight(title, "\x00 ")
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return false
	}
	// A server with a cluster_name puts it first ("postgres: 15/main: walwriter", as Debian's clusters do).
	if first, after, found := strings.Cut(rest, " "); found && strings.HasSuffix(first, ":") {
		rest = after
	}
	for _, bg := range []string{"walwriter", "checkpointer", "background writer"} {
		if rest == bg {
			return true
		}
	}
	words := strings.Fields(rest)
	return len(words) >= 2 && words[1] == database
}

// processCPU is the CPU time (user and system) a process used so far, from /proc/<pid>/stat; false if it cannot be read.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	_, cpu, ok := parseStat(string(b))
	return cpu, ok
}

// parseStat reads a process's name (comm) and CPU time from its /proc/<pid>/stat.
func parseStat(s string) (comm string, cpu time.Duration, ok bool) {
	// pid (comm) state ppid … utime stime: comm may hold spaces, so fields count from its closing parenthesis.
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 13 {
		return "", 0, false
	}
	user, err1 := strconv.ParseInt(fields[11], 10, 64)
	system, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return s[open+1 : closing], time.Duration(user+system) * clockTick, true
}

// perItem is the CPU time from u to v spent per item, on this process's side and PostgreSQL's.
func (u cpuUse) perItem(v cpuUse, items int) (self, postgres time.Duration) {
	self = (v.self - u.self) / time.Duration(items)
	if u.seen && v.seen {
		postgres = (v.postgres - u.postgres) / time.Duration(items)
	}
	return self, postgres
}
