package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/metrics"
	"github.com/memcgd/memcgd/state"
)

var update = flag.Bool("update", false, "rewrite the generated manifests: daemonset.yaml from the kustomize base, the PrometheusRule from the rule file")

// kinds are the Kubernetes types the manifests may hold, by apiVersion and
// kind; anything else is refused.
var kinds = map[schema.GroupVersionKind]func() any{
	{Version: "v1", Kind: "Namespace"}:                                      func() any { return &corev1.Namespace{} },
	{Version: "v1", Kind: "ServiceAccount"}:                                 func() any { return &corev1.ServiceAccount{} },
	{Version: "v1", Kind: "ConfigMap"}:                                      func() any { return &corev1.ConfigMap{} },
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}:                       func() any { return &appsv1.DaemonSet{} },
	{Group: "batch", Version: "v1", Kind: "Job"}:                            func() any { return &batchv1.Job{} },
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}:      func() any { return &networkingv1.NetworkPolicy{} },
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}:     func() any { return &monitoringv1.PodMonitor{} },
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}: func() any { return &monitoringv1.PrometheusRule{} },
}

// decodeAll decodes every document of a multi-document YAML stream into
// its Kubernetes type, strictly: an unknown or duplicate field, an
// unknown kind or a value of the wrong type fails.
func decodeAll(b []byte) ([]any, error) {
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []any
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := sigsyaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if meta.Kind == "" {
			continue // comments only
		}
		gv, err := schema.ParseGroupVersion(meta.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		newObj, ok := kinds[gv.WithKind(meta.Kind)]
		if !ok {
			return nil, fmt.Errorf("document %d: %s %s: not a kind these manifests hold", n, meta.APIVersion, meta.Kind)
		}
		obj := newObj()
		if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", n, meta.Kind, err)
		}
		out = append(out, obj)
	}
}

// render builds the kustomization in dir, in process, as `kustomize build`
// does: the order of its objects is the kustomization's (sortOptions).
func render(t *testing.T, dir string) []byte {
	t.Helper()
	o := krusty.MakeDefaultOptions()
	o.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(o).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every manifest under deploy/ decodes strictly: the Kubernetes objects
// into their API types, the kustomizations into kustomize's, memcgd's
// config files through config.Parse.
func TestManifestsDecodeStrictly(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		if strings.HasPrefix(path, "prometheus/") {
			return nil // Prometheus rule files: TestAlertRules
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		switch filepath.Base(path) {
		case "kustomization.yaml":
			var k kustomizetypes.Kustomization
			if err := sigsyaml.UnmarshalStrict(b, &k); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		case "config.yaml":
			if _, err := config.Parse(b); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		default:
			objs, err := decodeAll(b)
			if err != nil {
				t.Errorf("%s: %v", path, err)
			} else if len(objs) == 0 {
				t.Errorf("%s: no object", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("read %d manifests, want the 10 or more under deploy/", n)
	}
}

// deployment is what one rendering holds, by kind.
type deployment struct {
	namespaces      []*corev1.Namespace
	serviceAccounts []*corev1.ServiceAccount
	configMaps      []*corev1.ConfigMap
	daemonSets      []*appsv1.DaemonSet
	policies        []*networkingv1.NetworkPolicy
	podMonitors     []*monitoringv1.PodMonitor
	rules           []*monitoringv1.PrometheusRule
}

func sortObjects(t *testing.T, objs []any) deployment {
	t.Helper()
	var d deployment
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			d.namespaces = append(d.namespaces, o)
		case *corev1.ServiceAccount:
			d.serviceAccounts = append(d.serviceAccounts, o)
		case *corev1.ConfigMap:
			d.configMaps = append(d.configMaps, o)
		case *appsv1.DaemonSet:
			d.daemonSets = append(d.daemonSets, o)
		case *networkingv1.NetworkPolicy:
			d.policies = append(d.policies, o)
		case *monitoringv1.PodMonitor:
			d.podMonitors = append(d.podMonitors, o)
		case *monitoringv1.PrometheusRule:
			d.rules = append(d.rules, o)
		default:
			t.Errorf("unexpected %T in a rendering of the DaemonSet", o)
		}
	}
	for what, n := range map[string]int{"Namespace": len(d.namespaces), "ServiceAccount": len(d.serviceAccounts),
		"ConfigMap": len(d.configMaps), "DaemonSet": len(d.daemonSets), "NetworkPolicy": len(d.policies)} {
		if n != 1 {
			t.Fatalf("%d %s, want 1", n, what)
		}
	}
	return d
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does (runtime/debug:
// bytes, with an optional B, KiB, MiB, GiB or TiB suffix).
func goMemLimit(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			return n << u.shift, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// listenPort is the port of run's --listen in args.
func listenPort(t *testing.T, args []string) int {
	t.Helper()
	i := slices.Index(args, "--listen")
	if i < 0 || i+1 == len(args) {
		t.Fatalf("args %q: no --listen: the daemon would listen on loopback only, which nothing outside the pod reaches", args)
	}
	_, port, err := net.SplitHostPort(args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkDeployment checks a rendering's invariants: the namespace's pod
// security level, no service account token, the daemon's network
// (its own, the endpoint guarded), the probes, GOMEMLIMIT, the
// capabilities, the config, and the monitoring objects.
func checkDeployment(t *testing.T, d deployment, under string, monitored bool) {
	u := readUnit(t)
	ns := d.namespaces[0]
	// hostPID, hostPath and these capabilities are refused below it.
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("namespace %s: pod-security.kubernetes.io/enforce %q, want privileged", ns.Name, got)
	}
	sa := d.serviceAccounts[0]
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("service account %s mounts its token, want automountServiceAccountToken: false", sa.Name)
	}
	ds := d.daemonSets[0]
	for _, o := range []string{sa.Namespace, ds.Namespace, d.configMaps[0].Namespace, d.policies[0].Namespace} {
		if o != ns.Name {
			t.Errorf("an object in namespace %q, want %s", o, ns.Name)
		}
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("pod: service account %q, automount %v; want %s without its token", pod.ServiceAccountName, pod.AutomountServiceAccountToken, sa.Name)
	}
	if !pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Errorf("pod: hostPID %v hostNetwork %v hostIPC %v; want the host's PID namespace only", pod.HostPID, pod.HostNetwork, pod.HostIPC)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container %s: privileged or allowed to escalate, want neither", c.Name)
	} else {
		var add []string
		for _, a := range sc.Capabilities.Add {
			add = append(add, strings.ToLower(string(a)))
		}
		if want := slices.Sorted(slices.Values(u.bounding)); !slices.Equal(slices.Sorted(slices.Values(add)), want) {
			t.Errorf("container %s: adds %v, want the unit's bounding set %v", c.Name, add, want)
		}
		if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s: drops %v, want [ALL]", c.Name, sc.Capabilities.Drop)
		}
	}

	// The endpoint listens on the pod's network, on the port the probes,
	// the NetworkPolicy and the PodMonitor name.
	if !slices.Contains(c.Args, "--allow-non-loopback") {
		t.Errorf("args %q: no --allow-non-loopback, so the daemon refuses a non-loopback --listen", c.Args)
	}
	port := listenPort(t, c.Args)
	var portName string
	for _, p := range c.Ports {
		if int(p.ContainerPort) == port {
			portName = p.Name
		}
	}
	if portName == "" {
		t.Fatalf("no container port %d (--listen)", port)
	}
	probes := map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	wantPath := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}
	for what, p := range probes {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", what)
			continue
		}
		g := p.HTTPGet
		if g.Path != wantPath[what] || g.Host != "" || g.Port != intstr.FromString(portName) && g.Port != intstr.FromInt32(int32(port)) {
			t.Errorf("%s probe: host %q path %s port %v, want the pod's %s on %s", what, g.Host, g.Path, g.Port.String(), wantPath[what], portName)
		}
	}

	// GOMEMLIMIT: the unit's, at most half the container's limit (the
	// rest holds what the Go runtime does not count).
	var gml string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gml = e.Value
		}
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if gml != u.env["GOMEMLIMIT"] {
		t.Errorf("GOMEMLIMIT %q, want the unit's %q", gml, u.env["GOMEMLIMIT"])
	} else if n, err := goMemLimit(gml); err != nil || limit.IsZero() || n > limit.Value()/2 {
		t.Errorf("GOMEMLIMIT %q (%v), memory limit %v: want a limit and GOMEMLIMIT at most half of it", gml, err, limit.String())
	}

	// The config is mounted whole (kubelet updates no subPath) and
	// manages the overlay's subtree.
	cm := d.configMaps[0]
	var configVolume string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			configVolume = v.Name
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == configVolume {
			mounted = m.SubPath == "" && slices.Contains(c.Args, filepath.Join(m.MountPath, "config.yaml"))
		}
	}
	if configVolume == "" || !mounted {
		t.Errorf("ConfigMap %s not mounted as a directory holding --config", cm.Name)
	}
	if cfg, err := config.Parse([]byte(cm.Data["config.yaml"])); err != nil {
		t.Errorf("ConfigMap %s: %v", cm.Name, err)
	} else if string(cfg.Under) != under {
		t.Errorf("ConfigMap %s: manage.under %s, want %s", cm.Name, cfg.Under, under)
	}

	// The NetworkPolicy selects the pod, admits the monitoring namespace
	// alone on the endpoint's port, and no egress.
	np := d.policies[0].Spec
	for k, v := range np.PodSelector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("NetworkPolicy selects %s=%s, the pod has %q", k, v, ds.Spec.Template.Labels[k])
		}
	}
	if !slices.Equal(np.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) || len(np.Egress) != 0 {
		t.Errorf("NetworkPolicy: types %v, %d egress rules; want Ingress and Egress, no egress allowed", np.PolicyTypes, len(np.Egress))
	}
	if len(np.Ingress) != 1 || len(np.Ingress[0].From) != 1 || len(np.Ingress[0].Ports) != 1 {
		t.Fatalf("NetworkPolicy: ingress %+v, want one rule from one peer to one port", np.Ingress)
	}
	from, to := np.Ingress[0].From[0], np.Ingress[0].Ports[0]
	if from.IPBlock != nil || from.PodSelector != nil || from.NamespaceSelector == nil ||
		len(from.NamespaceSelector.MatchExpressions) != 0 ||
		!maps(from.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": "monitoring"}) {
		t.Errorf("NetworkPolicy admits %+v, want the monitoring namespace alone", from)
	}
	if to.Port == nil || (*to.Port != intstr.FromInt32(int32(port)) && *to.Port != intstr.FromString(portName)) ||
		to.Protocol == nil || *to.Protocol != corev1.ProtocolTCP {
		t.Errorf("NetworkPolicy admits port %v, want TCP %d", to.Port, port)
	}

	if !monitored {
		if len(d.podMonitors)+len(d.rules) != 0 {
			t.Error("monitoring objects in a rendering that needs no Prometheus Operator")
		}
		return
	}
	if len(d.podMonitors) != 1 || len(d.rules) != 1 {
		t.Fatalf("%d PodMonitors, %d PrometheusRules; want 1 each", len(d.podMonitors), len(d.rules))
	}
	pm := d.podMonitors[0].Spec
	for k, v := range pm.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("PodMonitor selects %s=%s, the pod has %q", k, v, ds.Spec.Template.Labels[k])
		}
	}
	// job="memcgd", as the rules and the dashboard select.
	if job := ds.Spec.Template.Labels[pm.JobLabel]; job != "memcgd" {
		t.Errorf("PodMonitor: jobLabel %q gives job %q, want memcgd", pm.JobLabel, job)
	}
	if len(pm.PodMetricsEndpoints) != 1 || pm.PodMetricsEndpoints[0].Port == nil ||
		*pm.PodMetricsEndpoints[0].Port != portName || pm.PodMetricsEndpoints[0].Path != "/metrics" {
		t.Errorf("PodMonitor endpoints %+v, want /metrics on port %s", pm.PodMetricsEndpoints, portName)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The kustomizations render in process, as `kustomize build` would, and
// every rendering decodes strictly and keeps the invariants.
func TestKustomizationsRender(t *testing.T) {
	tests := []struct {
		dir       string
		under     string
		monitored bool
	}{
		{"kustomize/base", "/kubepods", false},
		{"kustomize/overlays/cgroupfs", "/kubepods", true},
		{"kustomize/overlays/systemd", "/kubepods.slice", true},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			objs, err := decodeAll(render(t, tt.dir))
			if err != nil {
				t.Fatal(err)
			}
			checkDeployment(t, sortObjects(t, objs), tt.under, tt.monitored)
		})
	}
}

// daemonSetHeader heads deploy/daemonset.yaml, which kustomize's output
// lacks.
const daemonSetHeader = `# memcgd as a Kubernetes DaemonSet, for kubelet's cgroupfs driver (pods
# under /kubepods): kubectl apply -f deploy/daemonset.yaml, after setting
# the image. Generated from deploy/kustomize/base (kustomize build), whose
# files say why each setting is there: edit those, then
# go test ./deploy -run TestGeneratedManifests -update. docs/deploy.md has
# the overlays (the systemd driver, the Prometheus Operator).
`

// prometheusRuleHeader heads the generated PrometheusRule.
const prometheusRuleHeader = `# The alert rules of deploy/prometheus/memcgd-rules.yaml as a Prometheus
# Operator PrometheusRule. Generated: edit the rule file, then
# go test ./deploy -run TestGeneratedManifests -update.
`

// prometheusRule wraps the rule file's groups into a PrometheusRule.
func prometheusRule(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("prometheus/memcgd-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups yaml.Node `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	doc := struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string            `yaml:"name"`
			Namespace string            `yaml:"namespace"`
			Labels    map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Groups *yaml.Node `yaml:"groups"`
		} `yaml:"spec"`
	}{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"}
	doc.Metadata.Name, doc.Metadata.Namespace = "memcgd", "memcgd"
	doc.Metadata.Labels = map[string]string{"app.kubernetes.io/name": "memcgd"}
	doc.Spec.Groups = &file.Groups
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return append([]byte(prometheusRuleHeader), out.Bytes()...)
}

// The generated manifests are what their sources give: daemonset.yaml the
// base rendered, the PrometheusRule the rule file's groups.
func TestGeneratedManifests(t *testing.T) {
	files := []struct {
		path string
		want []byte
	}{
		{"daemonset.yaml", append([]byte(daemonSetHeader), render(t, "kustomize/base")...)},
		{"kustomize/components/prometheus-operator/prometheusrule.yaml", prometheusRule(t)},
	}
	for _, f := range files {
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatalf("%v (go test ./deploy -run TestGeneratedManifests -update writes it)", err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is not what its source gives: go test ./deploy -run TestGeneratedManifests -update", f.path)
		}
	}
	// The PrometheusRule holds the rule file's rules, field for field.
	objs, err := decodeAll(files[1].want)
	if err != nil {
		t.Fatal(err)
	}
	var fromFile struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	b, err := os.ReadFile("prometheus/memcgd-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.UnmarshalStrict(b, &fromFile); err != nil {
		t.Fatal(err)
	}
	got, _ := sigsyaml.Marshal(objs[0].(*monitoringv1.PrometheusRule).Spec.Groups)
	want, _ := sigsyaml.Marshal(fromFile.Groups)
	if !bytes.Equal(got, want) {
		t.Errorf("PrometheusRule groups\n%s\nwant the rule file's\n%s", got, want)
	}
}

// The probes' paths are ones the daemon's endpoint serves, the readiness
// probe's the one that reports readiness: through metrics.Serve, /readyz
// answers 503 while the daemon is not ready and /healthz 200.
func TestProbesHitTheDaemonsEndpoints(t *testing.T) {
	objs, err := decodeAll(render(t, "kustomize/base"))
	if err != nil {
		t.Fatal(err)
	}
	c := sortObjects(t, objs).daemonSets[0].Spec.Template.Spec.Containers[0]
	ln, err := metrics.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := metrics.NewRegistry(func() []state.Status { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	notReady := errors.New("the first scan has not finished")
	go func() {
		done <- metrics.Serve(ctx, ln, metrics.Handler(reg, nil), metrics.ServerOptions{Ready: func() error { return notReady }})
	}()
	defer func() { cancel(); <-done }()
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		code  int
	}{
		{"readiness", c.ReadinessProbe, http.StatusServiceUnavailable},
		{"liveness", c.LivenessProbe, http.StatusOK},
	} {
		resp, err := http.Get("http://" + ln.Addr().String() + p.probe.HTTPGet.Path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != p.code {
			t.Errorf("%s probe: GET %s = %d while not ready, want %d", p.what, p.probe.HTTPGet.Path, resp.StatusCode, p.code)
		}
	}
}
