package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and runs; deploy/Dockerfile holds and runs the same
// (TestDockerfileBuildsTheSameImage).
const (
	repository  = "ghcr.io/memcgd/memcgd"
	binaryPath  = "usr/local/bin/memcgd"
	licensePath = "usr/share/doc/memcgd/LICENSE"
	pathEnv     = "PATH=/usr/local/bin"
)

var (
	entrypoint = []string{"/" + binaryPath}
	// The DaemonSet's args replace it; `docker run IMAGE` alone runs the
	// daemon.
	cmd = []string{"run"}
)

// options are the command's flags.
type options struct {
	output, binary, version, revision, tag, arch, root string
}

// built describes the image written.
type built struct {
	ref, digest, revision string
}

// build builds the binary (unless o.binary names one), assembles the image
// and writes the tarball.
func build(o options) (built, error) {
	src, err := gitSource(o.root)
	if err != nil {
		return built{}, err
	}
	if o.version != "" {
		src.version = o.version
	}
	if o.revision != "" {
		src.revision = o.revision
	}
	if src.version == "" {
		src.version = "devel"
	}
	if t, ok, err := sourceDateEpoch(); err != nil {
		return built{}, err
	} else if ok {
		src.time = t
	}
	ref := o.tag
	if ref == "" {
		ref = repository + ":" + tagOf(src.version)
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return built{}, fmt.Errorf("-tag: invalid value %q: allowed a registry/repository:tag reference: %w", ref, err)
	}
	bin := o.binary
	if bin == "" {
		dir, err := os.MkdirTemp("", "memcgd-image-")
		if err != nil {
			return built{}, err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "memcgd")
		if err := goBuild(o.root, o.arch, src, bin); err != nil {
			return built{}, err
		}
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return built{}, err
	}
	if err := checkStatic(bin, o.arch); err != nil {
		return built{}, err
	}
	license, err := os.ReadFile(filepath.Join(o.root, "LICENSE"))
	if err != nil {
		return built{}, err
	}
	img, err := assemble(o.arch, src, binary, license)
	if err != nil {
		return built{}, err
	}
	if err := writeArchive(o.output, img, tag, src.time); err != nil {
		return built{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return built{}, err
	}
	return built{ref: tag.String(), digest: d.String(), revision: src.revision}, nil
}

// tagOf makes a version a valid tag: "+" (semver's build metadata, +dirty)
// and anything else a tag cannot hold become "-".
func tagOf(version string) string {
	t := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, version)
	return t[:min(len(t), 128)]
}

// goBuildArgs are the go build flags of the image's binary, shared with
// deploy/Dockerfile: static (CGO_ENABLED=0 in the environment), no paths
// of the build machine, no symbol table, and the version linked in (the
// toolchain's own VCS stamp is missing from a worktree's or a Docker
// context's builds).
func goBuildArgs(version, revision, modified, out string) []string {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.revision=%s -X main.modified=%s", version, revision, modified)
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/memcgd"}
}

func goBuild(root, arch string, src source, out string) error {
	c := exec.Command("go", goBuildArgs(src.version, src.revision, strconv.FormatBool(src.modified), out)...)
	c.Dir = root
	c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	return nil
}

// elfMachine is the ELF machine of each GOARCH the image is built for.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStatic checks that bin is a static Linux executable for arch: on
// no base image there is no dynamic loader and no libc.
func checkStatic(bin, arch string) error {
	want, ok := elfMachine[arch]
	if !ok {
		return fmt.Errorf("-arch: invalid value %q: allowed amd64 or arm64", arch)
	}
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s: built for %v, want %v (%s)", bin, f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0", bin)
		}
	}
	return nil
}

// labels are the image's OCI annotations (image-spec annotations.md).
func labels(src source) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "memcgd",
		"org.opencontainers.image.description": "Per-cgroup dirty limits, background reclaim and writeback-first for Linux memory cgroups",
		"org.opencontainers.image.source":      "https://github.com/memcgd/memcgd",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     src.version,
		"org.opencontainers.image.created":     src.time.UTC().Format(time.RFC3339),
	}
	if src.revision != "" {
		l["org.opencontainers.image.revision"] = src.revision
	}
	return l
}

// assemble builds the image: one layer with the binary and the licence,
// owned by root, stamped with src.time.
func assemble(arch string, src source, binary, license []byte) (v1.Image, error) {
	layerTar, err := rootfs(src.time, binary, license)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: src.time},
		Config: v1.Config{
			Entrypoint: entrypoint,
			Cmd:        cmd,
			Env:        []string{pathEnv},
			WorkingDir: "/",
			Labels:     labels(src),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: src.time},
			CreatedBy: "go run ./deploy/image",
			Comment:   "the static memcgd binary and its licence",
		},
	})
}

// rootfs is the layer's tar: the directories leading to each file, then
// the file, every entry root's, at mtime.
func rootfs(mtime time.Time, binary, license []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	add := func(path string, mode int64, body []byte) error {
		var parents []string
		for d := filepath.Dir(path); d != "."; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
				return err
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(body)), ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add(binaryPath, 0o755, binary); err != nil {
		return nil, err
	}
	if err := add(licensePath, 0o644, license); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
