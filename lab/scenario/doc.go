// Package scenario is the data layer of svclab's lessons: the scenario.yaml
// format (one directory per scenario under scenarios/), its loader and its
// validator, the declarations of faults and checks that the fault library
// (lab/faults) and the grader (lab/grade) implement, the JSON Schema of the
// format for editors, the attempts files of "svclab scenario test
// --wrong-fixes-from" (LoadAttempts), and the "svclab scenario" command
// (lint, list; lab/session runs test, lab/attempt adds the attempt
// commands).
//
// A scenario names the cluster shape it needs, the manifests that set up a
// working application, the faults that then break it, the task in exam
// wording, progressive hints, weighted checks, a reference solution, the
// explanation shown after solving, and plausible wrong fixes that the checks
// must reject (each with the checks that reject it and, where it can be
// undone, the commands that undo it).
//
// Decoding is strict: unknown fields, wrong types and malformed YAML are
// problems. Every problem names the file, the line and the field path, and a
// load collects all of them instead of stopping at the first:
//
//	scenarios/selector-typo/scenario.yaml:14: checks[2].weight: must be a positive number
//
// The same struct tags drive the field rules of the validator and the
// generated JSON Schema (Schema, published at scenarios/schema.json), so the
// two cannot drift apart; rules that span fields or files (manifests that
// exist and decode as Kubernetes objects, node names that fit the cluster
// shape, fault parameters, unique ids) are checked by the validator only.
package scenario
