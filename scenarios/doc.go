// Package scenarios holds svclab's lessons as data: one directory per
// scenario with a scenario.yaml and the manifests it applies, in the format
// that lab/scenario loads and validates (its JSON Schema is schema.json
// here, for editors). The directories are compiled into svclab (FS), so the
// binary carries its scenarios; "svclab scenario lint" checks them. Source
// is them as a scenario.Source, and Load loads them, with svclab's faults:
// the one way svclab loads its built-in catalog.
package scenarios
