package webhook

import (
	"encoding/json"
	"fmt"

	"github.com/switchboard/switchboard/internal/sealbox"
)

// headersAD is appended to the endpoint ID as the associated data of sealed static headers, so that a sealed secret
// copied into the headers column (or the other way round) does not open.
const headersAD = ":headers"

// SealHeaders seals an endpoint's static delivery headers (they often carry credentials); nil or empty headers give
// nil, stored as NULL.
func SealHeaders(b *sealbox.Box, headers map[string]string, endpointID string) *string {
	if len(headers) == 0 {
		return nil
	}
	plain, err := json.Marshal(headers)
	if err != nil {
		panic(fmt.Sprintf("webhook: encode headers: %v", err)) // a map of strings always encodes
	}
	sealed := b.Seal(plain, []byte(endpointID+headersAD))
	return &sealed
}

// OpenHeaders opens headers sealed by SealHeaders; nil gives none. Returns sealbox.ErrOpen if they do not open.
func OpenHeaders(b *sealbox.Box, sealed *string, endpointID string) (map[string]string, error) {
	if sealed == nil {
		return nil, nil
	}
	plain, err := b.Open(*sealed, []byte(endpointID+headersAD))
	if err != nil {
		return nil, err
	}
	var headers map[string]string
	if err := json.Unmarshal(plain, &headers); err != nil {
		return nil, sealbox.ErrOpen
	}
	return headers, nil
}
