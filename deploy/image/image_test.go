package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const repoRoot = "../.."

// untar unpacks the tarball at path into a new directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: entry %s of type %c, want directories and files only", path, h.Name, h.Typeflag)
		}
	}
}

// layerFile is one entry of a layer.
type layerFile struct {
	mode     int64
	uid, gid int
	typ      byte
	body     []byte
}

func layerFiles(t *testing.T, l v1.Layer) map[string]layerFile {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{mode: h.Mode, uid: h.Uid, gid: h.Gid, typ: h.Typeflag, body: b}
	}
}

// headRevision is git's HEAD, "" without git or a repository.
func headRevision(t *testing.T) string {
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("no git revision: %v", err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

// The image builds offline and reads back, both as an OCI layout and as a
// docker-archive, as what it claims: the static binary, executable, at
// the entrypoint, no shell, labelled with the revision and version the
// binary itself reports; and the same inputs build the same digest.
func TestImageBuildsAndReadsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon: not in -short")
	}
	const epoch = 1764600000
	t.Setenv("SOURCE_DATE_EPOCH", "1764600000")
	out := filepath.Join(t.TempDir(), "memcgd.oci.tar")
	desc, err := build(options{output: out, root: repoRoot, arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	rev := headRevision(t)
	if desc.revision != rev {
		t.Errorf("revision %q, want git's HEAD %q", desc.revision, rev)
	}

	// As an OCI image layout.
	dir := untar(t, out)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json: %d manifests, want 1", len(im.Manifests))
	}
	m := im.Manifests[0]
	if m.Digest.String() != desc.digest || m.Annotations["io.containerd.image.name"] != desc.ref ||
		!strings.HasSuffix(desc.ref, ":"+m.Annotations["org.opencontainers.image.ref.name"]) {
		t.Errorf("index.json: %+v, want %s named %s", m, desc.digest, desc.ref)
	}
	img, err := idx.Image(m.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/memcgd"}) || !slices.Equal(c.Cmd, []string{"run"}) {
		t.Errorf("entrypoint %q, cmd %q; want [/usr/local/bin/memcgd] [run]", c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Time.Equal(time.Unix(epoch, 0)) {
		t.Errorf("os %s, architecture %s, created %v; want linux, %s, SOURCE_DATE_EPOCH", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH)
	}
	version := c.Labels["org.opencontainers.image.version"]
	if c.Labels["org.opencontainers.image.revision"] != rev || version == "" ||
		c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" ||
		c.Labels["org.opencontainers.image.created"] != "2025-12-01T14:40:00Z" {
		t.Errorf("labels %v: want revision %s, a version, the licence and SOURCE_DATE_EPOCH", c.Labels, rev)
	}
	if rev != "" && !strings.Contains(version, rev[:12]) && !strings.HasPrefix(version, "v") {
		t.Errorf("version %q: neither a tag nor a pseudo-version of %s", version, rev)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	files := layerFiles(t, layers[0])
	want := []string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/memcgd", "usr/share/", "usr/share/doc/", "usr/share/doc/memcgd/", "usr/share/doc/memcgd/LICENSE"}
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, want) {
		t.Errorf("layer holds %q, want %q (no shell, nothing else)", got, want)
	}
	bin := files["usr/local/bin/memcgd"]
	if bin.typ != tar.TypeReg || bin.mode != 0o755 || bin.uid != 0 || bin.gid != 0 {
		t.Errorf("memcgd: type %c mode %o owner %d:%d, want a regular file 0755 root:root", bin.typ, bin.mode, bin.uid, bin.gid)
	}
	license, err := os.ReadFile(filepath.Join(repoRoot, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["usr/share/doc/memcgd/LICENSE"].body, license) {
		t.Error("the image's LICENSE differs from the repository's")
	}

	// The binary is static and reports the labels' version and revision.
	exe := filepath.Join(t.TempDir(), "memcgd")
	if err := os.WriteFile(exe, bin.body, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("memcgd is dynamically linked: the image has no loader")
		}
	}
	ef.Close()
	said, err := exec.Command(exe, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantLine := "memcgd " + version
	if rev != "" {
		wantLine += " revision " + rev
	}
	if !strings.HasPrefix(string(said), wantLine) {
		t.Errorf("memcgd version = %q, want it to start with %q", said, wantLine)
	}

	// As a docker-archive (docker load, crane push): the same config
	// and layer.
	dimg, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range []struct {
		what        string
		oci, docker func(v1.Image) (v1.Hash, error)
	}{
		{"config", v1.Image.ConfigName, v1.Image.ConfigName},
		{"layer", firstDiffID, firstDiffID},
	} {
		a, err := pair.oci(img)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pair.docker(dimg)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s: %s in the OCI layout, %s in the docker-archive", pair.what, a, b)
		}
	}

	// The same binary, version, revision and epoch: the same image.
	again := filepath.Join(t.TempDir(), "again.oci.tar")
	desc2, err := build(options{output: again, binary: exe, root: repoRoot, arch: runtime.GOARCH, version: version, revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	if desc2.digest != desc.digest {
		t.Errorf("rebuilt from the same inputs: %s, want %s", desc2.digest, desc.digest)
	}

	// An independent reader, where installed.
	if skopeo, err := exec.LookPath("skopeo"); err == nil {
		for _, transport := range []string{"oci-archive:", "docker-archive:"} {
			if b, err := exec.Command(skopeo, "inspect", "--config", transport+out).CombinedOutput(); err != nil {
				t.Errorf("skopeo inspect %s: %v\n%s", transport, err, b)
			}
		}
	}
}

func firstDiffID(img v1.Image) (v1.Hash, error) {
	ls, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	return ls[0].DiffID()
}

func TestTagOf(t *testing.T) {
	tests := []struct{ version, tag string }{
		{"v0.1.0", "v0.1.0"},
		{"v0.0.0-20261201155251-dce6f76f5a3e+dirty", "v0.0.0-20261201155251-dce6f76f5a3e-dirty"},
		{"devel", "devel"},
		{strings.Repeat("a", 200), strings.Repeat("a", 128)},
	}
	for _, tt := range tests {
		if got := tagOf(tt.version); got != tt.tag {
			t.Errorf("tagOf(%q) = %q, want %q", tt.version, got, tt.tag)
		}
	}
}

// dockerfile is what the test reads of deploy/Dockerfile: the Go version,
// the build command, and the final stage's instructions.
type dockerfile struct {
	goVersion       string
	run             string            // the build stage's go build RUN
	copies          map[string]string // final stage: destination -> source
	env             []string          // final stage
	labels          map[string]string // final stage
	entrypoint, cmd []string
	from            string // the final stage's base
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines, drop comments.
	var lines []string
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || l == "" && cur == "" {
			continue
		}
		if rest, ok := strings.CutSuffix(l, "\\"); ok {
			cur += rest + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	d := dockerfile{copies: map[string]string{}, labels: map[string]string{}}
	final := false
	label := regexp.MustCompile(`([a-z.]+)="([^"]*)"`)
	for _, l := range lines {
		inst, rest, _ := strings.Cut(l, " ")
		switch inst {
		case "ARG":
			if v, ok := strings.CutPrefix(rest, "GO_VERSION="); ok {
				d.goVersion = v
			}
		case "FROM":
			f := strings.Fields(rest)
			final = !slices.Contains(f, "AS")
			if final {
				d.from = f[len(f)-1]
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.run = rest
			}
		case "COPY":
			if final {
				f := strings.Fields(rest)
				d.copies[f[len(f)-1]] = f[len(f)-2]
			}
		case "ENV":
			d.env = append(d.env, rest)
		case "LABEL":
			for _, m := range label.FindAllStringSubmatch(rest, -1) {
				d.labels[m[1]] = m[2]
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: %v", rest, err)
			}
		case "CMD":
			if err := json.Unmarshal([]byte(rest), &d.cmd); err != nil {
				t.Fatalf("CMD %s: %v", rest, err)
			}
		}
	}
	return d
}

// deploy/Dockerfile builds what deploy/image builds: the same Go, the same
// build flags, the same files at the same paths on no base, the same
// environment, labels, entrypoint and command.
func TestDockerfileBuildsTheSameImage(t *testing.T) {
	d := readDockerfile(t)
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goLine == nil || d.goVersion != string(goLine[1]) {
		t.Errorf("Dockerfile builds with Go %q, go.mod says %q", d.goVersion, goLine)
	}
	if d.from != "scratch" {
		t.Errorf("final stage FROM %q, want scratch (no base, as deploy/image)", d.from)
	}
	var quoted []string
	for _, a := range goBuildArgs("${VERSION}", "${REVISION}", "${MODIFIED}", "/out/memcgd") {
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		quoted = append(quoted, a)
	}
	wantRun := "CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} go " + strings.Join(quoted, " ")
	if got := strings.Join(strings.Fields(d.run), " "); got != wantRun {
		t.Errorf("Dockerfile's build:\n%s\nwant deploy/image's:\n%s", got, wantRun)
	}
	wantCopies := map[string]string{"/" + binaryPath: "/out/memcgd", "/" + licensePath: "LICENSE"}
	if !maps.Equal(d.copies, wantCopies) {
		t.Errorf("Dockerfile copies %v, want %v", d.copies, wantCopies)
	}
	if !slices.Equal(d.env, []string{pathEnv}) {
		t.Errorf("Dockerfile's ENV %q, want [%s]", d.env, pathEnv)
	}
	if !slices.Equal(d.entrypoint, entrypoint) || !slices.Equal(d.cmd, cmd) {
		t.Errorf("Dockerfile: ENTRYPOINT %q CMD %q, want %q %q", d.entrypoint, d.cmd, entrypoint, cmd)
	}
	want := labels(source{version: "${VERSION}", revision: "${REVISION}"})
	want["org.opencontainers.image.created"] = "${CREATED}"
	if !maps.Equal(d.labels, want) {
		t.Errorf("Dockerfile's labels\n%v\nwant deploy/image's\n%v", d.labels, want)
	}
}
