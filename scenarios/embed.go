package scenarios

import "embed"

// FS holds every scenario directory (and schema.json at its root).
//
//go:embed schema.json */*
var FS embed.FS

// Schema is the JSON Schema of scenario.yaml.
//
//go:embed schema.json
var Schema []byte
