package config

import (
	"fmt"
	"path"
	"strings"

	"github.com/memcgd/memcgd/host"
)

// UnderAuto is the manage.under that picks, where the daemon starts, the
// subtree the kubelet puts pods in: /kubepods.slice with the systemd cgroup
// driver, /kubepods with the cgroupfs one, whichever exists.
const UnderAuto = "auto"

// kubepods are the subtrees auto picks from: the kubelet's pod root (its
// --cgroup-root "/" joined with "kubepods") as each cgroup driver names
// it (kubelet pkg/kubelet/cm/cgroup_manager_linux.go, ToSystemd).
var kubepods = []host.Cgroup{"/kubepods.slice", "/kubepods"}

// ResolveUnder checks that the managed subtree exists, exists telling
// whether a cgroup does in the memory hierarchy, and resolves auto into the
// subtree it picks. It is refused, with the field, the value and the
// cgroups that do exist, when the subtree is missing: a daemon started on
// a subtree that does not exist would idle, managing nothing, as if all
// were well. The daemon checks at start and at each reload.
func (c *Config) ResolveUnder(exists func(host.Cgroup) bool) error {
	if c.UnderAuto {
		var found []host.Cgroup
		for _, k := range kubepods {
			if exists(k) {
				found = append(found, k)
			}
		}
		switch len(found) {
		case 1:
			c.Under = found[0]
			return nil
		case 0:
			return fmt.Errorf("config: manage.under: %s: neither %s nor %s exists: allowed on a Kubernetes node only; elsewhere set manage.under to the subtree to manage, such as /",
				UnderAuto, described(kubepods[0]), described(kubepods[1]))
		default:
			return fmt.Errorf("config: manage.under: %s: both %s and %s exist: set manage.under to the one of the kubelet's cgroup driver",
				UnderAuto, described(kubepods[0]), described(kubepods[1]))
		}
	}
	if exists(c.Under) {
		return nil
	}
	var found []host.Cgroup
	kube := false
	for _, a := range alternatives(c.Under) {
		if exists(a) {
			found = append(found, a)
			kube = kube || isKubepods(a)
		}
	}
	orAuto := ""
	if kube {
		orAuto = ", or to " + UnderAuto + ", which picks " + string(kubepods[0]) + " or " + string(kubepods[1]) + " on each node"
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("config: manage.under: %s does not exist: allowed an existing cgroup, such as /, or %s on a Kubernetes node", c.Under, UnderAuto)
	case 1:
		return fmt.Errorf("config: manage.under: %s does not exist; %s does (%s): set manage.under to it%s", c.Under, found[0], driver(found[0]), orAuto)
	default:
		names := make([]string, len(found))
		for i, f := range found {
			names[i] = described(f)
		}
		return fmt.Errorf("config: manage.under: %s does not exist; these do: %s: set manage.under to one of them%s", c.Under, strings.Join(names, ", "), orAuto)
	}
}

// described names a cgroup with the cgroup driver its name is in.
func described(cg host.Cgroup) string { return fmt.Sprintf("%s (%s)", cg, driver(cg)) }

// driver is the cgroup driver whose naming cg is in: systemd's slices end
// in ".slice".
func driver(cg host.Cgroup) string {
	if strings.HasSuffix(string(cg), ".slice") {
		return "systemd cgroup driver"
	}
	return "cgroupfs cgroup driver"
}

func isKubepods(cg host.Cgroup) bool {
	for _, k := range kubepods {
		if cg == k {
			return true
		}
	}
	return false
}

// alternatives are the cgroups a missing manage.under may have meant, in
// the order the error lists them: the same cgroup in the other driver's
// naming, the sibling that differs by ".slice" alone, and the kubepods
// subtrees when the value is at or beneath one of them.
func alternatives(under host.Cgroup) []host.Cgroup {
	var out []host.Cgroup
	add := func(cg host.Cgroup, ok bool) {
		if !ok || cg == under {
			return
		}
		for _, o := range out {
			if o == cg {
				return
			}
		}
		out = append(out, cg)
	}
	add(systemdName(under))
	add(cgroupfsName(under))
	if under != "/" {
		dir, base := path.Split(string(under))
		if b, ok := strings.CutSuffix(base, ".slice"); ok {
			add(host.Cgroup(dir+b), b != "")
		} else {
			add(host.Cgroup(dir+base+".slice"), true)
		}
	}
	top := under
	for path.Dir(string(top)) != "/" {
		top = host.Cgroup(path.Dir(string(top)))
	}
	if top == "/kubepods" || top == "/kubepods.slice" {
		for _, k := range kubepods {
			add(k, true)
		}
	}
	return out
}

// systemdName is a cgroupfs-driver path in the systemd driver's naming:
// each element a slice named after its parents, "-" inside a name escaped
// as "_" (/kubepods/burstable/pod-1 is
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod_1.slice).
func systemdName(cg host.Cgroup) (host.Cgroup, bool) {
	if cg == "/" || strings.Contains(string(cg), ".") {
		return "", false
	}
	var b strings.Builder
	prefix := ""
	for _, e := range strings.Split(string(cg)[1:], "/") {
		prefix += strings.ReplaceAll(e, "-", "_")
		b.WriteString("/" + prefix + ".slice")
		prefix += "-"
	}
	return host.Cgroup(b.String()), true
}

// cgroupfsName is the inverse of systemdName, for a path of slices each
// named after its parent.
func cgroupfsName(cg host.Cgroup) (host.Cgroup, bool) {
	if cg == "/" {
		return "", false
	}
	var b strings.Builder
	parent := ""
	for _, e := range strings.Split(string(cg)[1:], "/") {
		name, ok := strings.CutSuffix(e, ".slice")
		if !ok {
			return "", false
		}
		own, ok := strings.CutPrefix(name, parent)
		if !ok || own == "" || strings.Contains(own, "-") {
			return "", false
		}
		b.WriteString("/" + strings.ReplaceAll(own, "_", "-"))
		parent = name + "-"
	}
	return host.Cgroup(b.String()), true
}
