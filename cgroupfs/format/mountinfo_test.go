package format

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseMountInfo(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    []Mount // checked against the mounts of these mount points
		count   int
		wantErr string
	}{{
		name:  "hybrid host: memory, freezer on v1, unified cgroup2 without controllers",
		in:    fixture(t, "v1/mountinfo"),
		count: 19,
		want: []Mount{{
			ID: 34, ParentID: 30, Minor: 31, Root: "/", MountPoint: "/sys/fs/cgroup/memory", Options: []string{"rw", "relatime"},
			FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "memory"},
		}, {
			ID: 40, ParentID: 30, Minor: 37, Root: "/", MountPoint: "/sys/fs/cgroup/unified", Options: []string{"rw", "relatime"},
			FSType: "cgroup2", Source: "cgroup2", SuperOptions: []string{"rw"},
		}},
	}, {
		name:  "Debian 6.1 VM: cgroup2 at /sys/fs/cgroup",
		in:    fixture(t, "v2/mountinfo"),
		count: 6,
		want: []Mount{{
			ID: 25, ParentID: 22, Minor: 21, Root: "/", MountPoint: "/sys/fs/cgroup", Options: []string{"rw", "relatime"},
			FSType: "cgroup2", Source: "none", SuperOptions: []string{"rw"},
		}},
	}, {
		name:  "optional fields, escaped paths and a container's cgroup subtree",
		in:    []byte(`100 20 0:31 /docker/ab\040c /sys/fs/cgroup/my\134mem ro,nosuid shared:5 master:1 - cgroup cgroup rw,memory` + "\n"),
		count: 1,
		want: []Mount{{
			ID: 100, ParentID: 20, Minor: 31, Root: "/docker/ab c", MountPoint: `/sys/fs/cgroup/my\mem`, Options: []string{"ro", "nosuid"},
			FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "memory"},
		}},
	}, {
		name:  "an empty source keeps its place",
		in:    []byte("1 0 0:1 / /x rw - tmpfs  rw\n"),
		count: 1,
		want:  []Mount{{ID: 1, Minor: 1, Root: "/", MountPoint: "/x", Options: []string{"rw"}, FSType: "tmpfs", SuperOptions: []string{"rw"}}},
	}, {
		name:  "a backslash not followed by three octal digits is kept",
		in:    []byte(`1 0 0:1 / /a\9b\4 rw - tmpfs none rw` + "\n"),
		count: 1,
		want:  []Mount{{ID: 1, Minor: 1, Root: "/", MountPoint: `/a\9b\4`, Options: []string{"rw"}, FSType: "tmpfs", Source: "none", SuperOptions: []string{"rw"}}},
	}, {
		name:    "no separator names the line",
		in:      []byte("1 0 0:1 / / rw - tmpfs none rw\n2 1 0:2 / /x rw tmpfs none rw\n"),
		wantErr: `mountinfo line 2 "2 1 0:2 / /x rw tmpfs none rw"`,
	}, {
		name:    "a bad device number",
		in:      []byte("1 0 8 / / rw - ext4 /dev/sda rw\n"),
		wantErr: `device "8": want major:minor in decimal`,
	}, {
		name:    "a bad mount ID",
		in:      []byte("x 0 0:1 / / rw - tmpfs none rw\n"),
		wantErr: `mount ID "x": want a decimal number`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountInfo(bytes.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.count {
				t.Errorf("%d mounts, want %d", len(got), tt.count)
			}
			for _, w := range tt.want {
				i := slices.IndexFunc(got, func(m Mount) bool { return m.MountPoint == w.MountPoint })
				if i < 0 {
					t.Errorf("no mount at %s", w.MountPoint)
					continue
				}
				if !reflect.DeepEqual(got[i], w) {
					t.Errorf("mount at %s:\n got %+v\nwant %+v", w.MountPoint, got[i], w)
				}
			}
		})
	}
}

// escapeOctal escapes a path as the kernel's mangle_path does for mountinfo.
func escapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			b.WriteString(`\` + string(rune('0'+c>>6)) + string(rune('0'+c>>3&7)) + string(rune('0'+c&7)))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func FuzzParseMountInfo(f *testing.F) {
	addFixtures(f, "*/mountinfo")
	f.Add([]byte(`1 0 0:1 /a\040b /c\011d rw shared:1 - cgroup x rw,memory`))
	f.Fuzz(func(t *testing.T, b []byte) {
		mounts, err := ParseMountInfo(bytes.NewReader(b))
		if err != nil {
			return
		}
		// A parsed mount printed back as the kernel would print it parses
		// to the same mount: unescaping inverts the kernel's escaping.
		for _, m := range mounts {
			if strings.ContainsAny(m.FSType+m.Source+strings.Join(m.Options, "")+strings.Join(m.SuperOptions, ""), " \n\\") {
				continue // only paths are escaped; such a line cannot come from the kernel
			}
			line := strings.Join([]string{"1 2 0:0", escapeOctal(m.Root), escapeOctal(m.MountPoint),
				strings.Join(m.Options, ","), "-", m.FSType, m.Source, strings.Join(m.SuperOptions, ",")}, " ")
			again, err := ParseMountInfo(strings.NewReader(line))
			if err != nil {
				t.Fatalf("reprinted %q: %v", line, err)
			}
			if again[0].Root != m.Root || again[0].MountPoint != m.MountPoint {
				t.Fatalf("reprinted %q: root %q mount point %q, want %q %q", line, again[0].Root, again[0].MountPoint, m.Root, m.MountPoint)
			}
		}
	})
}
