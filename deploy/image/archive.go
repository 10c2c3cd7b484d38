package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerManifest is one entry of a docker-archive's manifest.json (moby's
// image/tarexport): where its config and layers are in the tarball.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes img to path as an OCI image layout (oci-layout,
// index.json, blobs/sha256/) with a docker-archive's manifest.json beside
// it, pointing into the same blobs, as `docker save` has written since
// Docker 25. Every entry has mtime; the file appears complete or not at
// all (written beside, then renamed).
func writeArchive(path string, img v1.Image, tag name.Tag, mtime time.Time) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	mdigest, err := img.Digest()
	if err != nil {
		return err
	}
	mtype, err := img.MediaType()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cdigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}

	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mtype,
			Digest:    mdigest,
			Size:      int64(len(manifest)),
			Platform:  &v1.Platform{Architecture: cf.Architecture, OS: cf.OS},
			Annotations: map[string]string{
				// containerd's `ctr images import` names the image so;
				// the OCI name is the tag alone (image-spec
				// annotations.md).
				"io.containerd.image.name":          tag.String(),
				"org.opencontainers.image.ref.name": tag.TagStr(),
			},
		}},
	})
	if err != nil {
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	docker := []dockerManifest{{Config: blob(cdigest), RepoTags: []string{tag.String()}}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		docker[0].Layers = append(docker[0].Layers, blob(d))
	}
	dockerJSON, err := json.Marshal(docker)
	if err != nil {
		return err
	}

	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	dir := func(n string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n, Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR})
	}
	file := func(n string, size int64, body io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: size, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		_, err := io.Copy(tw, body)
		return err
	}
	bytesFile := func(n string, b []byte) error { return file(n, int64(len(b)), bytes.NewReader(b)) }
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		err = file(blob(d), size, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
	}
	for _, f := range []struct {
		name string
		body []byte
	}{
		{blob(cdigest), config},
		{blob(mdigest), manifest},
		{"index.json", index},
		{"manifest.json", dockerJSON},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	} {
		if err := bytesFile(f.name, f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
