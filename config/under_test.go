package config

import (
	"strings"
	"testing"

	"github.com/memcgd/memcgd/host"
)

// manage.under must name a cgroup that exists; auto picks the kubelet's
// pod subtree of the node's cgroup driver. A refusal names the field, the
// value and the cgroups that do exist.
func TestResolveUnder(t *testing.T) {
	tests := []struct {
		name     string
		under    string
		existing []host.Cgroup
		want     host.Cgroup // when accepted
		wantErr  []string    // words of the refusal, in order
		// suggestsAuto: the refusal suggests auto too.
		suggestsAuto bool
	}{
		{name: "an existing subtree", under: "/kubepods", existing: []host.Cgroup{"/", "/kubepods"}, want: "/kubepods"},
		{name: "the root", under: "/", existing: []host.Cgroup{"/"}, want: "/"},
		{name: "auto on a systemd-driver node", under: "auto", existing: []host.Cgroup{"/", "/kubepods.slice", "/system.slice"}, want: "/kubepods.slice"},
		{name: "auto on a cgroupfs-driver node", under: "auto", existing: []host.Cgroup{"/", "/kubepods"}, want: "/kubepods"},
		{name: "auto off Kubernetes", under: "auto", existing: []host.Cgroup{"/", "/system.slice"},
			wantErr: []string{"manage.under: auto: neither /kubepods.slice (systemd cgroup driver) nor /kubepods (cgroupfs cgroup driver) exists", "such as /"}},
		{name: "auto with both", under: "auto", existing: []host.Cgroup{"/", "/kubepods", "/kubepods.slice"},
			wantErr: []string{"manage.under: auto: both /kubepods.slice", "and /kubepods", "exist"}},
		{name: "the cgroupfs name on a systemd-driver node", under: "/kubepods", existing: []host.Cgroup{"/", "/kubepods.slice"},
			wantErr: []string{"manage.under: /kubepods does not exist; /kubepods.slice does (systemd cgroup driver): set manage.under to it"}, suggestsAuto: true},
		{name: "the systemd name on a cgroupfs-driver node", under: "/kubepods.slice", existing: []host.Cgroup{"/", "/kubepods"},
			wantErr: []string{"manage.under: /kubepods.slice does not exist; /kubepods does (cgroupfs cgroup driver): set manage.under to it"}, suggestsAuto: true},
		{name: "a QoS class in the other driver's naming", under: "/kubepods/burstable",
			existing: []host.Cgroup{"/", "/kubepods.slice", "/kubepods.slice/kubepods-burstable.slice"},
			wantErr:  []string{"/kubepods/burstable does not exist; these do: /kubepods.slice/kubepods-burstable.slice (systemd cgroup driver), /kubepods.slice (systemd cgroup driver): set manage.under to one of them"}, suggestsAuto: true},
		{name: "a pod in the cgroupfs driver's naming", under: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice",
			existing: []host.Cgroup{"/", "/kubepods", "/kubepods/besteffort/pod1-2"},
			wantErr:  []string{"does not exist; these do: /kubepods/besteffort/pod1-2 (cgroupfs cgroup driver), /kubepods (cgroupfs cgroup driver)"}, suggestsAuto: true},
		{name: "a sibling that differs by .slice", under: "/a/kubepods", existing: []host.Cgroup{"/", "/a", "/a/kubepods.slice"},
			wantErr: []string{"manage.under: /a/kubepods does not exist; /a/kubepods.slice does (systemd cgroup driver): set manage.under to it"}},
		{name: "nothing like it", under: "/nope", existing: []host.Cgroup{"/", "/kubepods.slice"},
			wantErr: []string{"manage.under: /nope does not exist: allowed an existing cgroup, such as /, or auto on a Kubernetes node"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte("version: 1\nmanage: {under: " + tt.under + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = c.ResolveUnder(func(cg host.Cgroup) bool {
				for _, e := range tt.existing {
					if e == cg {
						return true
					}
				}
				return false
			})
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("accepted as %s, want a refusal", c.Under)
				}
				rest := err.Error()
				for _, w := range tt.wantErr {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Fatalf("error %q does not say %q (after what came before)", err, w)
					}
					rest = rest[i+len(w):]
				}
				// auto is suggested where a kubepods subtree exists.
				if got := strings.Contains(err.Error(), ", or to auto, which picks /kubepods.slice or /kubepods on each node"); got != tt.suggestsAuto {
					t.Errorf("error %q: suggests auto %v, want %v", err, got, tt.suggestsAuto)
				}
				return
			}
			if err != nil || c.Under != tt.want {
				t.Errorf("Under %q, %v; want %q", c.Under, err, tt.want)
			}
		})
	}
}

func TestParseUnderAuto(t *testing.T) {
	c, err := Parse([]byte("version: 1\nmanage: {under: auto}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.UnderAuto || c.Under != "" {
		t.Errorf("manage.under auto: Under %q, UnderAuto %v; want unresolved", c.Under, c.UnderAuto)
	}
}

// The systemd driver's naming and the cgroupfs driver's are each other's
// inverse, for names without the "_" that escapes "-" or the "." of a
// unit suffix.
func FuzzDriverNames(f *testing.F) {
	for _, s := range []string{"/kubepods", "/kubepods/burstable", "/kubepods/besteffort/pod1-2-3", "/a/b/c", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cg, err := host.ParseCgroup(s)
		if err != nil || strings.ContainsAny(s, "_.") {
			return
		}
		sd, ok := systemdName(cg)
		if !ok {
			if cg != "/" {
				t.Fatalf("systemdName(%q) refused", cg)
			}
			return
		}
		if _, err := host.ParseCgroup(string(sd)); err != nil {
			t.Fatalf("systemdName(%q) = %q: %v", cg, sd, err)
		}
		back, ok := cgroupfsName(sd)
		if !ok || back != cg {
			t.Fatalf("cgroupfsName(systemdName(%q)) = %q, %v; want %q", cg, back, ok, cg)
		}
	})
}
