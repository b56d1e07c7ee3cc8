// Package manifest decodes multi-document YAML files of Services,
// EndpointSlices and Nodes (also inside a v1 List) for the proxier's
// offline tools. Unknown fields, unsupported kinds and invalid addresses,
// ports or protocols are reported with the file, line, document number,
// object and field path.
package manifest
