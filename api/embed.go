// Package api holds the OpenAPI description of Switchboard, the single source of truth for the server, its request
// validation, the interactive reference and the generated clients.
package api

import _ "embed"

// Spec is api/openapi.yaml byte for byte, served to people and tools at /openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
