// Package ociimage turns svclab's images (lab/images: the debootstrapped
// tools root filesystem and the thin layers on top of it) into container
// images in Go, with go-containerregistry, and writes them as image archives
// (docker save format) that containerd imports — so clusters whose nodes run
// containerd, such as kind's, get the lab's images without docker build and
// without a registry.
//
// Each layer directory becomes one gzip-compressed tar layer, packed once
// and cached under the builder's directory, keyed by the directory (its
// path, inode and modification time: lab/images never changes a layer in
// place, it builds a new one). Images share their layers: the tools layer
// is in an archive once, however many images and tags stand on it.
package ociimage
