package clicks

import (
	"fmt"
	"net/netip"

	"github.com/oschwald/maxminddb-golang/v2"
)

// GeoIP answers the country of an address from a MaxMind database (GeoLite2-Country, GeoIP2-Country or -City, or
// any .mmdb with the same country fields), memory-mapped and read without locks.
type GeoIP struct{ db *maxminddb.Reader }

// OpenGeoIP opens the .mmdb file at path.
func OpenGeoIP(path string) (*GeoIP, error) {
	db, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open GeoIP database %s: %w", path, err)
	}
	return &GeoIP{db: db}, nil
}

// Country returns the ISO 3166-1 alpha-2 code of the country of a (the registered country when the database has
// no location for it), or "" when it does not know.
func (g *GeoIP) Country(a netip.Addr) string {
	if g == nil {
		return ""
	}
	var rec struct {
		Country struct {
			ISOCode string `maxminddb:"iso_code"`
		} `maxminddb:"country"`
		Registered struct {
			ISOCode string `maxminddb:"iso_code"`
		} `maxminddb:"registered_country"`
	}
	if err := g.db.Lookup(a).Decode(&rec); err != nil {
		return ""
	}
	code := rec.Country.ISOCode
	if code == "" {
		code = rec.Registered.ISOCode
	}
	if len(code) != 2 {
		return ""
	}
	return code
}

// Close unmaps the database.
func (g *GeoIP) Close() error {
	if g == nil {
		return nil
	}
	return g.db.Close()
}
