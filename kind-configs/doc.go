// Package kindconfigs holds the cluster shapes of the kind backend
// (lab/kind) as kind configuration files, one file per shape, compiled into
// svclab. Each file is a plain kind Cluster configuration that
// "kind create cluster --config" also accepts; what kind's format cannot say
// (which mode the bundled proxier runs in) is in Shapes.
package kindconfigs
