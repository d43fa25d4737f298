package main

// Code generation. Tool versions are pinned by the `tool` directives in go.mod; run `make generate` from the root.

//go:generate go tool oapi-codegen -config oapi-codegen.yaml api/openapi.yaml
