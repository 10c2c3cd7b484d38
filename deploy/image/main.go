// Command image builds memcgd's container image without a container
// engine: the static binary at /usr/local/bin/memcgd and the licence, on
// no base image (no shell, no libc), written as one tarball that is both
// an OCI image layout (oci-archive) and a docker-archive, the layout
// `docker save` writes since Docker 25: `docker load`, `podman load`,
// `skopeo copy oci-archive:` or `docker-archive:`, `crane push` and
// `ctr images import` all read it. deploy/Dockerfile builds the same image
// with an engine.
//
// From the repository's root:
//
//	go run ./deploy/image -o memcgd.oci.tar
//	crane push memcgd.oci.tar ghcr.io/memcgd/memcgd:v0.1.0
//
// The version and revision come from git (as the Go toolchain's own
// pseudo-versions: a tag on HEAD, else v0.0.0-<commit time>-<commit>, with
// +dirty for a modified tree); they are linked into the binary (memcgd
// version, memcgd_build_info) and written as the image's
// org.opencontainers.image.version and .revision labels. Every time stamp
// is SOURCE_DATE_EPOCH's, else the commit's: the same commit builds the
// same image, digest for digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o options
	flag.StringVar(&o.output, "o", "memcgd.oci.tar", "the tarball to write")
	flag.StringVar(&o.binary, "binary", "", "a static memcgd binary to package instead of building one (its version is then -version's)")
	flag.StringVar(&o.version, "version", "", "the version to link and label (default: from git)")
	flag.StringVar(&o.revision, "revision", "", "the VCS revision to link and label (default: git's HEAD)")
	flag.StringVar(&o.tag, "tag", "", "the image reference it loads as (default: "+repository+":<version>)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "the GOARCH to build for")
	flag.StringVar(&o.root, "C", ".", "the repository's root")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	desc, err := build(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s %s (revision %s)\n", o.output, desc.ref, desc.digest, desc.revision)
}
