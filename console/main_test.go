package console_test

import (
	"testing"
	"time"

	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) {
	// A local zone with a half-hour offset makes any comparison of a UTC time with a local one (session expiry,
	// dates on the pages) show up as a failure instead of passing by luck on a machine set to UTC.
	time.Local = time.FixedZone("UTC+5:30", 5*3600+1800)
	storetest.Main(m)
}
