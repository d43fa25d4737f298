package clicks

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func sampleHits(n int) []Hit {
	hits := make([]Hit, n)
	at := time.Date(2026, 11, 22, 10, 15, 3, 120_000_000, time.UTC)
	for i := range hits {
		hits[i] = Hit{ID: NewHitID(at), At: at.Add(time.Duration(i) * time.Millisecond), LinkID: "lnk_01JDAC4D5E6F7G8H9J0K1M2N3P",
			UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/133.0", Referer: "https://news.example/item?id=1",
			IP: "203.0.113.9"}
	}
	hits[0].Head, hits[0].Class = true, "head"
	hits[n-1].IP, hits[n-1].UserAgent = "2001:db8:1:2::7", "" // IPv6, no agent
	return hits
}

func TestSpoolRecordsRoundTrip(t *testing.T) {
	hits := sampleHits(5)
	// Fields that change from one hit to the next and back (decoding shares a field equal to the last hit's).
	hits[2].LinkID, hits[3].Referer = "lnk_01JDAC4D5E6F7G8H9J0K1M2N3Q", ""
	var buf []byte
	for i := range hits {
		buf = appendRecord(buf, &hits[i])
	}
	got, corrupt := readRecords(buf)
	if corrupt != 0 || !reflect.DeepEqual(got, hits) {
		t.Fatalf("read back %d damaged, hits\n%+v\nwant\n%+v", corrupt, got, hits)
	}
}

// spoolDamage is a way a segment gets damaged on disk, and what reading it must return.
type spoolDamage struct {
	name        string
	damage      func([]byte) []byte
	want        []Hit
	wantCorrupt int
}

// damagedSegments returns a segment of four records and the damages the tests apply to it: a torn tail (a write cut
// short by a crash), a damaged record in the middle, garbage between records and a length that lies.
func damagedSegments() (segment []byte, damages []spoolDamage) {
	hits := sampleHits(4)
	var ends []int
	for i := range hits {
		segment = appendRecord(segment, &hits[i])
		ends = append(ends, len(segment))
	}
	return segment, []spoolDamage{
		{"torn tail", func(b []byte) []byte { return b[:ends[3]-5] }, hits[:3], 1},
		{"flipped byte in the second record", func(b []byte) []byte { b[ends[0]+20] ^= 0xff; return b }, []Hit{hits[0], hits[2], hits[3]}, 1},
		{"garbage between records", func(b []byte) []byte {
			out := append([]byte{}, b[:ends[1]]...)
			out = append(out, "garbage!"...)
			return append(out, b[ends[1]:]...)
		}, hits, 1},
		{"lying length", func(b []byte) []byte { b[ends[2]+4] = 0xff; b[ends[2]+5] = 0xff; return b }, hits[:3], 1},
	}
}

// Damaged records are skipped; everything else reads.
func TestSpoolSkipsDamagedRecords(t *testing.T) {
	segment, damages := damagedSegments()
	for _, tt := range damages {
		t.Run(tt.name, func(t *testing.T) {
			got, corrupt := readRecords(tt.damage(bytes.Clone(segment)))
			if corrupt != tt.wantCorrupt || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %d hits, %d damaged; want %d hits, %d damaged", len(got), corrupt, len(tt.want), tt.wantCorrupt)
			}
		})
	}
}

// A segment being written is locked by its writer, and a claimed segment by its replayer: nobody else reads them.
func TestSpoolSegmentsAreExclusive(t *testing.T) {
	dir := t.TempDir()
	sp, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.append(sampleHits(3)); err != nil {
		t.Fatal(err)
	}
	if names, err := sp.segments(); err != nil || len(names) != 0 {
		t.Fatalf("segments while the only one is active = %v, %v", names, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"+spoolSuffix))
	if len(files) != 1 {
		t.Fatalf("spool files %v", files)
	}
	if _, ok, err := claim(files[0]); ok || err != nil {
		t.Fatalf("claimed the segment its writer holds: %v, %v", ok, err)
	}
	if !sp.seal() {
		t.Fatal("seal found nothing to seal")
	}
	names, err := sp.segments()
	if err != nil || len(names) != 1 {
		t.Fatalf("segments after seal = %v, %v", names, err)
	}
	seg, ok, err := claim(names[0])
	if !ok || err != nil || len(seg.hits) != 3 {
		t.Fatalf("claim = %v, %v (%d hits)", ok, err, len(seg.hits))
	}
	if _, ok, _ := claim(names[0]); ok {
		t.Fatal("a second replayer claimed a claimed segment")
	}
	if err := seg.done(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(names[0]); !os.IsNotExist(err) {
		t.Fatalf("replayed segment still there: %v", err)
	}
	if _, ok, err := claim(names[0]); ok || err != nil {
		t.Fatalf("claim of a removed segment = %v, %v", ok, err)
	}
}

func TestSpoolRotatesLargeSegments(t *testing.T) {
	sp, err := openSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sp.activeSize = maxSegment // as if the segment were full
	if err := sp.append(sampleHits(1)); err != nil {
		t.Fatal(err)
	}
	first := sp.active.Name()
	sp.activeSize = maxSegment
	if err := sp.append(sampleHits(1)); err != nil {
		t.Fatal(err)
	}
	if sp.active.Name() == first {
		t.Fatal("a full segment was not rotated")
	}
	if names, _ := sp.segments(); len(names) != 1 || names[0] != first {
		t.Fatalf("sealed segments %v, want the first", names)
	}
}

// Any bytes read as a segment (a disk that returns garbage, a torn write, a file that is not a segment) never make
// the reader panic or loop; it returns exactly the records that are intact — the magic, a length within bounds, a
// CRC-32C that matches the payload, a payload that decodes — found scanning from the start, and counts each
// damaged stretch between them once.
func FuzzReadRecords(f *testing.F) {
	segment, damages := damagedSegments()
	f.Add(segment)
	for _, d := range damages {
		f.Add(d.damage(bytes.Clone(segment)))
	}
	f.Add([]byte{})
	f.Add([]byte(spoolMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, corrupt := readRecords(data)
		want, wantCorrupt := intactRecords(data)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read %d records, want the %d intact ones:\n%+v\nwant\n%+v", len(got), len(want), got, want)
		}
		if corrupt != wantCorrupt {
			t.Fatalf("counted %d damaged stretches, want %d", corrupt, wantCorrupt)
		}
	})
}

// intactRecords is the reader's specification, written for clarity rather than speed: from each position, the
// next record is the first intact one at or after it; the bytes skipped to reach it, and those after the last
// record, are damaged stretches.
func intactRecords(data []byte) (hits []Hit, damaged int) {
	for pos := 0; pos < len(data); {
		start := pos
		var h Hit
		var size int
		for ; start < len(data); start++ {
			if h, size = intactAt(data[start:]); size > 0 {
				break
			}
		}
		if start > pos {
			damaged++
		}
		if start == len(data) {
			break
		}
		hits = append(hits, h)
		pos = start + size
	}
	return hits, damaged
}

// intactAt decodes the record at the start of b, checking its frame and CRC-32C independently of readRecord; size
// is 0 when there is no intact record there.
func intactAt(b []byte) (h Hit, size int) {
	if !bytes.HasPrefix(b, []byte(spoolMagic)) || len(b) < spoolHeader {
		return Hit{}, 0
	}
	n := uint64(binary.LittleEndian.Uint32(b[4:8]))
	if n > maxSpoolRecord || uint64(len(b)-spoolHeader) < n {
		return Hit{}, 0
	}
	payload := b[spoolHeader : spoolHeader+int(n)]
	if crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(b[8:12]) {
		return Hit{}, 0
	}
	h, err := decodeHit(payload, new(hitStrings))
	if err != nil {
		return Hit{}, 0
	}
	return h, spoolHeader + int(n)
}
