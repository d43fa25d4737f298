package clicks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"
)

// The spool is where clicks wait on disk while the database cannot take them: a directory of append-only segment
// files ("clicks-<ULID>.spool", named in time order), each a sequence of records
//
//	magic "SBck" | payload length (uint32 LE) | CRC-32C of the payload (uint32 LE) | payload
//
// where the payload is one Hit (see appendHit). Every append is one write followed by fsync, so a record is either
// on disk whole or detected as torn: a reader skips a record whose magic, length or checksum is wrong and resumes
// at the next magic. A process writes only its own segment, holding an flock on it; a replayer takes the flock of
// a segment before reading it, so two processes sharing the directory never replay one segment at once, and the
// kernel releases the locks of a process that died.
const (
	spoolMagic     = "SBck"
	spoolHeader    = 12
	spoolSuffix    = ".spool"
	maxSpoolRecord = 64 << 10
	// maxSegment is the size at which a segment is closed and a new one started, so replays read bounded files.
	maxSegment = 16 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errCorruptRecord means a record failed its checks.
var errCorruptRecord = errors.New("clicks: corrupt spool record")

type spool struct {
	dir string

	mu         sync.Mutex
	active     *os.File // the segment this process appends to, flocked; nil until the first append
	activeSize int64
	buf        []byte
}

func openSpool(dir string) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("clicks: create spool directory: %w", err)
	}
	return &spool{dir: dir}, nil
}

// append writes hits to the active segment and makes them durable (fsync) before it returns.
func (s *spool) append(hits []Hit) error {
	if len(hits) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil || s.activeSize >= maxSegment {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	s.buf = s.buf[:0]
	for i := range hits {
		s.buf = appendRecord(s.buf, &hits[i])
	}
	n, err := s.active.Write(s.buf)
	s.activeSize += int64(n)
	if err == nil {
		err = s.active.Sync()
	}
	if err != nil {
		// A short or unsynced write may have left a torn record: start a new segment next time, so later records
		// never follow garbage (readers would skip it anyway).
		s.closeActive()
		return fmt.Errorf("clicks: write spool: %w", err)
	}
	return nil
}

// rotate closes the active segment and creates a new one, durable in the directory.
func (s *spool) rotate() error {
	s.closeActive()
	name := filepath.Join(s.dir, "clicks-"+ulid.Make().String()+spoolSuffix)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("clicks: create spool segment: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return fmt.Errorf("clicks: lock spool segment: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		_ = f.Close()
		return err
	}
	s.active, s.activeSize = f, 0
	return nil
}

func (s *spool) closeActive() {
	if s.active != nil {
		_ = s.active.Close() // releases the flock
		s.active, s.activeSize = nil, 0
	}
}

// seal closes the active segment so that it can be replayed; the next append starts a new one. It reports whether
// there was anything to seal.
func (s *spool) seal() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := s.active != nil && s.activeSize > 0
	s.closeActive()
	return had
}

// segments lists the segment files in time order, the active one excluded.
func (s *spool) segments() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	active := ""
	if s.active != nil {
		active = filepath.Base(s.active.Name())
	}
	s.mu.Unlock()
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), spoolSuffix) && e.Name() != active {
			names = append(names, filepath.Join(s.dir, e.Name()))
		}
	}
	slices.Sort(names)
	return names, nil
}

// bytes is the size of every segment in the directory (the metric of what waits for the database).
func (s *spool) bytes() int64 {
	var total int64
	_ = filepath.WalkDir(s.dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(d.Name(), spoolSuffix) {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// claimedSegment is a segment this process holds the lock of while replaying it.
type claimedSegment struct {
	f    *os.File
	hits []Hit
	// corrupt counts the damaged stretches found while reading it.
	corrupt int
}

// claim locks and reads a segment. ok is false when another process holds it (or it disappeared).
func claim(path string) (seg *claimedSegment, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	// Another replayer may have finished and removed it between our open and our lock.
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		_ = f.Close()
		return nil, false, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		_ = f.Close()
		return nil, false, err
	}
	hits, corrupt := readRecords(data)
	return &claimedSegment{f: f, hits: hits, corrupt: corrupt}, true, nil
}

// done removes a fully replayed segment and releases it.
func (c *claimedSegment) done() error {
	err := os.Remove(c.f.Name())
	_ = c.f.Close()
	return err
}

// release gives the segment back for a later replay.
func (c *claimedSegment) release() { _ = c.f.Close() }

// readRecords decodes every intact record of a segment and counts the damaged stretches between them (a torn
// tail after a crash, or corruption on disk), each once: a stretch may hold bytes that look like a magic but start
// no intact record.
func readRecords(data []byte) (hits []Hit, corrupt int) {
	magic := []byte(spoolMagic)
	damaged := false // whether off is inside a damaged stretch already counted
	var last hitStrings
	for off := 0; off < len(data); {
		h, n, err := readRecord(data[off:], &last)
		if err == nil {
			hits = append(hits, h)
			off += n
			damaged = false
			continue
		}
		if !damaged {
			corrupt++
			damaged = true
		}
		next := bytes.Index(data[off+1:], magic)
		if next < 0 {
			break
		}
		off += 1 + next
	}
	return hits, corrupt
}

func readRecord(b []byte, last *hitStrings) (Hit, int, error) {
	if len(b) < spoolHeader || string(b[:4]) != spoolMagic {
		return Hit{}, 0, errCorruptRecord
	}
	n := int(binary.LittleEndian.Uint32(b[4:8]))
	if n > maxSpoolRecord || len(b) < spoolHeader+n {
		return Hit{}, 0, errCorruptRecord
	}
	payload := b[spoolHeader : spoolHeader+n]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[8:12]) {
		return Hit{}, 0, errCorruptRecord
	}
	h, err := decodeHit(payload, last)
	return h, spoolHeader + n, err
}

func appendRecord(b []byte, h *Hit) []byte {
	start := len(b)
	b = append(b, spoolMagic...)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = appendHit(b, h)
	payload := b[start+spoolHeader:]
	binary.LittleEndian.PutUint32(b[start+4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+8:], crc32.Checksum(payload, crcTable))
	return b
}

// appendHit encodes a hit: ID (16 bytes), time (Unix nanoseconds, int64 LE), flags (bit 0: HEAD), then class, link
// ID, user agent, referer and IP as uvarint-length-prefixed strings.
func appendHit(b []byte, h *Hit) []byte {
	b = append(b, h.ID[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.At.UnixNano()))
	var flags byte
	if h.Head {
		flags |= 1
	}
	b = append(b, flags)
	for _, s := range []string{h.Class, h.LinkID, h.UserAgent, h.Referer, h.IP} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// hitStrings are the string fields of the hit decoded last (class, link ID, user agent, referer, IP). A spooled
// stretch of clicks mostly repeats them (the clicks of one link, a visitor's clicks), so a field equal to the last
// one shares its string: fewer allocations while decoding, and far less memory for a segment of one hot link.
type hitStrings [5]string

func decodeHit(b []byte, last *hitStrings) (Hit, error) {
	var h Hit
	if len(b) < 16+8+1 {
		return h, errCorruptRecord
	}
	copy(h.ID[:], b[:16])
	h.At = time.Unix(0, int64(binary.LittleEndian.Uint64(b[16:24]))).UTC()
	h.Head = b[24]&1 != 0
	b = b[25:]
	for i, dst := range [...]*string{&h.Class, &h.LinkID, &h.UserAgent, &h.Referer, &h.IP} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return h, errCorruptRecord
		}
		if v := b[k : k+int(n)]; string(v) != last[i] {
			last[i] = string(v)
		}
		*dst = last[i]
		b = b[k+int(n):]
	}
	if len(b) != 0 || h.LinkID == "" {
		return h, errCorruptRecord
	}
	return h, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("clicks: sync spool directory: %w", err)
	}
	return nil
}

// WriteSegment writes hits into dir as one sealed spool segment, the way a database outage leaves them: a running
// recorder with its spool in dir replays it as it would its own. The segment stays locked until it is whole and
// durable, so no recorder claims it half written. For benchmarks of the replay.
func WriteSegment(dir string, hits []Hit) error {
	sp, err := openSpool(dir)
	if err != nil {
		return err
	}
	defer sp.seal()
	return sp.append(hits)
}
