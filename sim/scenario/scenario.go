// Package scenario reads memcgd sim's versioned YAML scenarios: the
// machine, its disks, the cgroups, the workloads and the variants to
// compare. Loading is strict: an unknown key, a bad value or a reference
// to something undefined is an error naming the line, the field, the
// value and what is allowed. The seeds' three experiments are embedded as
// named scenarios.
package scenario

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/internal/strictyaml"
	"github.com/memcgd/memcgd/internal/suggest"
	"github.com/memcgd/memcgd/memcg"
)

// Version is the only scenario version this memcgd reads.
const Version = 1

//go:embed seeds/*.yaml
var embedded embed.FS

// Scenario is a loaded, validated scenario. Sizes are in bytes, rates in
// bytes per second.
type Scenario struct {
	Name, Description string
	Seed              uint64
	Until             time.Duration
	Sample            time.Duration
	Machine           Machine
	Disks             []Disk
	Cgroups           []Cgroup
	// CPUGroups are cpu groups (CFS bandwidth control) that workloads'
	// tasks are placed in.
	CPUGroups []CPUGroup
	Workloads []Workload
	Variants  []Variant
	Report    Report
}

// Machine is the simulated host.
type Machine struct {
	Memory, Reserved                        uint64
	Cgroup                                  int
	HZ                                      int64
	MinFreeKbytes, WatermarkScaleFactor     int64
	DirtyRatio, DirtyBackgroundRatio        uint64
	DirtyBytes, DirtyBackgroundBytes        uint64
	DirtyExpire, DirtyWritebackInterval     time.Duration
	WritePage, ReadPage, AnonPage, ScanPage time.Duration
	// JournalCommit is the journal write of an fdatasync, in bytes (0:
	// none).
	JournalCommit uint64
}

// Disk is a block device.
type Disk struct {
	Name                          string
	WriteBandwidth, ReadBandwidth uint64
	Latency                       time.Duration
	NrRequests                    int
	MaxRequest                    uint64
}

// Cgroup is one cgroup, or Count children of it.
type Cgroup struct {
	Path        string
	Limit, High uint64 // memcg.NoLimit when unset
	Count       int
	Knobs       map[string]string
}

// CPUGroup is a cpu group: cpu.max on v2 (a threaded cgroup), cpu.cfs_*
// on v1. Its parent is the cpu group at its path's parent, if listed, else
// the root.
type CPUGroup struct {
	Path string
	// Max is cpu.max: Quota (-1: "max") and Period, in microseconds.
	Max CPUMax
}

// CPUMax is a cpu.max value in microseconds; Quota -1 is "max".
type CPUMax struct{ Quota, Period int64 }

// Workload kinds.
const (
	KindWriter  = "writer"
	KindReader  = "reader"
	KindAnon    = "anon"
	KindBuild   = "build"
	KindDirtier = "dirtier"
	// KindSleeper sleeps Interval in a loop for Duration and measures how
	// late it wakes.
	KindSleeper = "sleeper"
	// KindWAL appends Block and fdatasyncs it in a loop for Duration (a
	// database's write-ahead log) and measures each commit.
	KindWAL = "wal"
)

// Workload is one program run in a cgroup (in each of its Count children
// for a dirtier).
type Workload struct {
	Name, Kind, Cgroup, Disk string
	Size, Block, Rate        uint64
	Accesses                 int
	Start, Hold, Compile     time.Duration
	Jobs                     int
	// Interval is a sleeper's sleep; Duration how long a sleeper or a
	// WAL runs.
	Interval, Duration time.Duration
	// CPUGroup is the cpu group its tasks run in ("": the root).
	CPUGroup string
}

// Kernel variant names.
const (
	KernelSeed000 = "seed-000"
	KernelSeed001 = "seed-001"
	KernelSeed004 = "seed-004"
	// KernelThrottle2633 is 2.6.33's dirty throttle in place of 6.x's,
	// to test explanations of the seeds' older results.
	KernelThrottle2633 = "throttle-2.6.33"
)

// Variant is one kernel (stock, with some seed patch sets) or memcgd on the
// stock kernel.
type Variant struct {
	Name   string
	Kernel []string
	// Memcgd runs the daemon's policy on the stock kernel.
	Memcgd *Memcgd
	// Knobs override the cgroups' knobs for this variant.
	Knobs map[string]string
	// CPUMax overrides cpu groups' cpu.max for this variant, by path.
	CPUMax map[string]CPUMax
}

// SelectVariants keeps only the variants named, in the order given. A name
// the scenario lacks is a *VariantError.
func (s *Scenario) SelectVariants(names []string) error {
	var keep []Variant
	for _, want := range names {
		found := false
		for _, v := range s.Variants {
			if v.Name == want {
				keep, found = append(keep, v), true
			}
		}
		if !found {
			have := make([]string, len(s.Variants))
			for i, v := range s.Variants {
				have[i] = v.Name
			}
			return &VariantError{Scenario: s.Name, Name: want, Have: have}
		}
	}
	s.Variants = keep
	return nil
}

// VariantError is a variant name that a scenario does not have.
type VariantError struct {
	Scenario, Name string
	// Have are the scenario's variants.
	Have []string
}

func (e *VariantError) Error() string {
	return fmt.Sprintf("no variant %q in scenario %s: allowed %s%s", e.Name, e.Scenario, strings.Join(e.Have, ", "), suggest.DidYouMean(e.Name, e.Have))
}

// Memcgd is the shipped daemon's scheduler (package sched) on the
// simulated clock, and its reaction model.
type Memcgd struct {
	// Interval is the longest between two looks at an active cgroup
	// (--active-interval); Latency is the delay from a watched threshold's
	// crossing to the daemon's step (the event latency: the wake-up,
	// queueing, reading cgroupfs), which the policy anticipates
	// (--reaction).
	Interval, Latency time.Duration
	// Tracker: the eBPF dirty tracker is in force (the default); without
	// it the daemon polls a dirtying cgroup (--dirty-tracker=off).
	Tracker bool
	// Pace: the throttle paces the dirtying tasks by CPU bandwidth, the
	// freezer only its backstop (the default); without it the freezer
	// throttles (--pace=off).
	Pace bool
}

// TableNoisyNeighbour is the noisy-neighbour table (E4): each workload's
// throughput and stopped time by cause, sleepers' wake-up lateness and
// WALs' commit latency.
const TableNoisyNeighbour = "noisy-neighbour"

// Report says what to show.
type Report struct {
	// Table is the seed table to print: seed-000, seed-001, seed-004,
	// summary or noisy-neighbour.
	Table string
	// Focus is the cgroup the time series follows; Workload the task whose
	// throughput and stalls are reported.
	Focus, Workload string
	// Warmup leaves the samples before it out of the p99 of dirty pages:
	// the start, before a daemon has seen the cgroup, is reported apart.
	Warmup time.Duration
}

// Names lists the embedded scenarios.
func Names() []string {
	ents, err := fs.ReadDir(embedded, "seeds")
	if err != nil {
		panic(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Embedded returns the YAML of an embedded scenario.
func Embedded(name string) ([]byte, error) {
	b, err := embedded.ReadFile("seeds/" + name + ".yaml")
	if err != nil {
		return nil, &NameError{Name: name}
	}
	return b, nil
}

// NameError is a scenario name that is not embedded.
type NameError struct{ Name string }

func (e *NameError) Error() string {
	names := Names()
	return fmt.Sprintf("no embedded scenario %q: allowed %s%s", e.Name, strings.Join(names, ", "), suggest.DidYouMean(e.Name, names))
}

// scalar is a YAML scalar kept as written, with its line, so that
// validation can report both.
type scalar struct {
	Value string
	Line  int
	Set   bool
}

// YAMLKind tells strictyaml that a scalar takes a single value.
func (scalar) YAMLKind() yaml.Kind { return yaml.ScalarNode }

// UnmarshalYAML keeps the scalar's text and line.
func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a single value, not a %s", n.Line, kindName(n.Kind))
	}
	s.Value, s.Line, s.Set = n.Value, n.Line, true
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "node"
}

type fileT struct {
	Version     scalar      `yaml:"version"`
	Name        scalar      `yaml:"name"`
	Description scalar      `yaml:"description"`
	Seed        scalar      `yaml:"seed"`
	Until       scalar      `yaml:"until"`
	Sample      scalar      `yaml:"sample"`
	Machine     machineT    `yaml:"machine"`
	Disks       []diskT     `yaml:"disks"`
	Cgroups     []cgroupT   `yaml:"cgroups"`
	CPUGroups   []cpuGroupT `yaml:"cpu_groups"`
	Workloads   []workloadT `yaml:"workloads"`
	Variants    []variantT  `yaml:"variants"`
	Report      reportT     `yaml:"report"`
}

type machineT struct {
	Memory                 scalar `yaml:"memory"`
	Reserved               scalar `yaml:"reserved"`
	Cgroup                 scalar `yaml:"cgroup"`
	HZ                     scalar `yaml:"hz"`
	MinFreeKbytes          scalar `yaml:"min_free_kbytes"`
	WatermarkScaleFactor   scalar `yaml:"watermark_scale_factor"`
	DirtyRatio             scalar `yaml:"dirty_ratio"`
	DirtyBackgroundRatio   scalar `yaml:"dirty_background_ratio"`
	DirtyBytes             scalar `yaml:"dirty_bytes"`
	DirtyBackgroundBytes   scalar `yaml:"dirty_background_bytes"`
	DirtyExpire            scalar `yaml:"dirty_expire"`
	DirtyWritebackInterval scalar `yaml:"dirty_writeback_interval"`
	JournalCommit          scalar `yaml:"journal_commit"`
	CPU                    struct {
		WritePage scalar `yaml:"write_page"`
		ReadPage  scalar `yaml:"read_page"`
		AnonPage  scalar `yaml:"anon_page"`
		ScanPage  scalar `yaml:"scan_page"`
	} `yaml:"cpu"`
}

type diskT struct {
	Name           scalar `yaml:"name"`
	WriteBandwidth scalar `yaml:"write_bandwidth"`
	ReadBandwidth  scalar `yaml:"read_bandwidth"`
	Latency        scalar `yaml:"latency"`
	NrRequests     scalar `yaml:"nr_requests"`
	MaxRequest     scalar `yaml:"max_request"`
}

type cgroupT struct {
	Path  scalar            `yaml:"path"`
	Limit scalar            `yaml:"limit"`
	High  scalar            `yaml:"high"`
	Count scalar            `yaml:"count"`
	Knobs map[string]scalar `yaml:"knobs"`
}

type cpuGroupT struct {
	Path scalar `yaml:"path"`
	Max  scalar `yaml:"max"`
}

type workloadT struct {
	Name     scalar `yaml:"name"`
	Kind     scalar `yaml:"kind"`
	Cgroup   scalar `yaml:"cgroup"`
	Disk     scalar `yaml:"disk"`
	Size     scalar `yaml:"size"`
	Block    scalar `yaml:"block"`
	Rate     scalar `yaml:"rate"`
	Accesses scalar `yaml:"accesses"`
	Start    scalar `yaml:"start"`
	Hold     scalar `yaml:"hold"`
	Compile  scalar `yaml:"compile"`
	Jobs     scalar `yaml:"jobs"`
	Interval scalar `yaml:"interval"`
	Duration scalar `yaml:"duration"`
	CPUGroup scalar `yaml:"cpu_group"`
}

type variantT struct {
	Name   scalar            `yaml:"name"`
	Kernel []scalar          `yaml:"kernel"`
	Memcgd *memcgdT          `yaml:"memcgd"`
	Knobs  map[string]scalar `yaml:"knobs"`
	CPUMax map[string]scalar `yaml:"cpu_max"`
}

type memcgdT struct {
	Interval scalar `yaml:"interval"`
	Latency  scalar `yaml:"latency"`
	Tracker  scalar `yaml:"tracker"`
	Pace     scalar `yaml:"pace"`
}

type reportT struct {
	Table    scalar `yaml:"table"`
	Focus    scalar `yaml:"focus"`
	Workload scalar `yaml:"workload"`
	Warmup   scalar `yaml:"warmup"`
}

// Error is a validation error at a line of the scenario.
type Error struct {
	// Line is the line of the value, 0 when it is missing from the file.
	Line         int
	Field, Value string
	Allowed      string
}

// Error names the line, the field, the value and what is allowed.
func (e *Error) Error() string {
	if e.Line == 0 {
		return "scenario: " + e.reason()
	}
	return fmt.Sprintf("scenario line %d: %s", e.Line, e.reason())
}

// reason is the error without its place.
func (e *Error) reason() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: missing: allowed %s", e.Field, e.Allowed)
	}
	return fmt.Sprintf("%s: invalid value %q: allowed %s", e.Field, e.Value, e.Allowed)
}

// Parse reads and validates a scenario, with sets (field path=value, see
// Assignment) applied first. An error that a set caused is a *SetError
// naming it.
func Parse(b []byte, sets ...Assignment) (*Scenario, error) {
	root, err := strictyaml.Parse(b)
	if err != nil {
		return nil, strictyaml.In("scenario", err)
	}
	if root.Kind == 0 {
		return nil, fmt.Errorf("scenario is empty: want at least \"version: %d\"", Version)
	}
	for i, s := range sets {
		if err := setPath(root, s, setLine(i)); err != nil {
			return nil, err
		}
	}
	var f fileT
	if err := strictyaml.Decode(root, &f); err != nil {
		return nil, located(err, sets)
	}
	p := &parser{}
	s := p.scenario(&f)
	if p.err != nil {
		return nil, located(p.err, sets)
	}
	return s, nil
}

// located is err with its place: the line of the file, or the --set
// argument that wrote the node (setLine).
func located(err error, sets []Assignment) error {
	line := 0
	var ke *strictyaml.KeyError
	var ve *Error
	var le *lineError
	switch {
	case errors.As(err, &ke):
		line = ke.Line
	case errors.As(err, &ve):
		line = ve.Line
	case errors.As(err, &le):
		line = le.line
	}
	if line < 0 && -line <= len(sets) {
		return &SetError{Arg: sets[-line-1].String(), Err: err}
	}
	if ve != nil {
		return err // it says "scenario line N" itself
	}
	return strictyaml.In("scenario", err)
}

// lineError is an error at a line of the scenario that is not an Error
// of field, value and allowed (an unknown knob).
type lineError struct {
	line  int
	field string
	err   error
}

func (e *lineError) Error() string {
	if e.line <= 0 {
		return fmt.Sprintf("%s: %v", e.field, e.err)
	}
	return fmt.Sprintf("line %d: %s: %v", e.line, e.field, e.err)
}

func (e *lineError) Unwrap() error { return e.err }

// parser collects the first validation error.
type parser struct{ err error }

func (p *parser) fail(field string, s scalar, allowed string) {
	if p.err == nil {
		p.err = &Error{Line: s.Line, Field: field, Value: s.Value, Allowed: allowed}
	}
}

func (p *parser) size(field string, s scalar, def uint64) uint64 {
	if !s.Set {
		return def
	}
	if s.Value == "max" {
		return memcg.NoLimit
	}
	n, err := memcg.ParseSize(s.Value)
	if err != nil {
		p.fail(field, s, "a size such as 4096, 16K, 100M or 20G (binary units)")
		return def
	}
	return n
}

func (p *parser) positiveSize(field string, s scalar, def uint64) uint64 {
	n := p.size(field, s, def)
	if s.Set && (n == 0 || n == memcg.NoLimit) && p.err == nil {
		p.fail(field, s, "a positive size such as 16K or 800M")
	}
	return n
}

func (p *parser) duration(field string, s scalar, def time.Duration) time.Duration {
	if !s.Set {
		return def
	}
	d, err := time.ParseDuration(s.Value)
	if err != nil || d < 0 {
		p.fail(field, s, "a non-negative duration such as 250ns, 100us, 50ms or 30s")
		return def
	}
	return d
}

func (p *parser) integer(field string, s scalar, def, lo, hi int64) int64 {
	if !s.Set {
		return def
	}
	n, err := strconv.ParseInt(s.Value, 10, 64)
	if err != nil || n < lo || n > hi {
		p.fail(field, s, fmt.Sprintf("an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

func (p *parser) oneOf(field string, s scalar, def string, allowed ...string) string {
	if !s.Set {
		return def
	}
	for _, a := range allowed {
		if s.Value == a {
			return a
		}
	}
	p.fail(field, s, "one of "+strings.Join(allowed, ", "))
	return def
}

// cpuMax reads cpu.max: "$QUOTA $PERIOD" in microseconds, the quota "max"
// for none, the period 100000 when left out; as tg_set_cfs_bandwidth()
// accepts them, a period of 1000 to 1000000 and a quota of at least 1000.
func (p *parser) cpuMax(field string, s scalar) CPUMax {
	bad := func() CPUMax {
		p.fail(field, s, `cpu.max: "max" or a quota of at least 1000 us, then optionally a period of 1000 to 1000000 us, such as "25000 100000"`)
		return CPUMax{Quota: -1, Period: 100000}
	}
	f := strings.Fields(s.Value)
	if len(f) == 0 || len(f) > 2 {
		return bad()
	}
	m := CPUMax{Quota: -1, Period: 100000}
	if f[0] != "max" {
		q, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || q < 1000 {
			return bad()
		}
		m.Quota = q
	}
	if len(f) == 2 {
		per, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || per < 1000 || per > 1000000 {
			return bad()
		}
		m.Period = per
	}
	return m
}

func (p *parser) knobs(field string, m map[string]scalar) map[string]string {
	out := map[string]string{}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out[n] = m[n].Value
	}
	k := memcg.DefaultKnobs()
	if err := k.Apply(out); err != nil && p.err == nil {
		var ke *memcg.KnobError
		var ue *memcg.UnknownKnobError
		switch {
		case errors.As(err, &ke):
			s := m[ke.Knob]
			p.err = &Error{Line: s.Line, Field: field + "." + ke.Knob, Value: ke.Value, Allowed: ke.Allowed}
		case errors.As(err, &ue):
			p.err = &lineError{line: m[ue.Knob].Line, field: field, err: err}
		default:
			p.err = fmt.Errorf("scenario: %s: %w", field, err)
		}
	}
	return out
}

func (p *parser) scenario(f *fileT) *Scenario {
	if !f.Version.Set {
		p.fail("version", scalar{}, strconv.Itoa(Version))
		return nil
	}
	p.integer("version", f.Version, Version, Version, Version)
	s := &Scenario{Name: f.Name.Value, Description: strings.TrimSpace(f.Description.Value)}
	s.Seed = uint64(p.integer("seed", f.Seed, 1, 0, 1<<62))
	s.Until = p.duration("until", f.Until, 10*time.Minute)
	s.Sample = p.duration("sample", f.Sample, 100*time.Millisecond)
	if s.Sample <= 0 && p.err == nil {
		p.fail("sample", f.Sample, "a positive duration such as 100ms")
	}
	m := &f.Machine
	s.Machine = Machine{
		Memory:                 p.positiveSize("machine.memory", m.Memory, 24<<30),
		Reserved:               p.size("machine.reserved", m.Reserved, 0),
		HZ:                     p.integer("machine.hz", m.HZ, 250, 100, 1000),
		MinFreeKbytes:          p.integer("machine.min_free_kbytes", m.MinFreeKbytes, 0, 0, 262144),
		WatermarkScaleFactor:   p.integer("machine.watermark_scale_factor", m.WatermarkScaleFactor, 10, 1, 3000),
		DirtyRatio:             uint64(p.integer("machine.dirty_ratio", m.DirtyRatio, 20, 0, 100)),
		DirtyBackgroundRatio:   uint64(p.integer("machine.dirty_background_ratio", m.DirtyBackgroundRatio, 10, 0, 100)),
		DirtyBytes:             p.size("machine.dirty_bytes", m.DirtyBytes, 0),
		DirtyBackgroundBytes:   p.size("machine.dirty_background_bytes", m.DirtyBackgroundBytes, 0),
		DirtyExpire:            p.duration("machine.dirty_expire", m.DirtyExpire, 30*time.Second),
		DirtyWritebackInterval: p.duration("machine.dirty_writeback_interval", m.DirtyWritebackInterval, 5*time.Second),
		JournalCommit:          p.size("machine.journal_commit", m.JournalCommit, 0),
		WritePage:              p.duration("machine.cpu.write_page", m.CPU.WritePage, 250*time.Nanosecond),
		ReadPage:               p.duration("machine.cpu.read_page", m.CPU.ReadPage, 250*time.Nanosecond),
		AnonPage:               p.duration("machine.cpu.anon_page", m.CPU.AnonPage, 250*time.Nanosecond),
		ScanPage:               p.duration("machine.cpu.scan_page", m.CPU.ScanPage, 50*time.Nanosecond),
	}
	switch p.oneOf("machine.cgroup", m.Cgroup, "v2", "v1", "v2") {
	case "v1":
		s.Machine.Cgroup = 1
	default:
		s.Machine.Cgroup = 2
	}
	if s.Machine.Reserved >= s.Machine.Memory && p.err == nil {
		p.fail("machine.reserved", m.Reserved, "a size below machine.memory")
	}
	disks := map[string]bool{}
	if len(f.Disks) == 0 && p.err == nil {
		p.err = &Error{Field: "disks", Allowed: "a list of at least one disk"}
	}
	for i, d := range f.Disks {
		w := fmt.Sprintf("disks[%d]", i)
		if !d.Name.Set {
			p.fail(w+".name", scalar{Line: d.WriteBandwidth.Line}, "a disk name such as vda")
		}
		if disks[d.Name.Value] {
			p.fail(w+".name", d.Name, "a name not used by another disk")
		}
		disks[d.Name.Value] = true
		bw := p.positiveSize(w+".write_bandwidth", d.WriteBandwidth, 400<<20)
		s.Disks = append(s.Disks, Disk{
			Name:           d.Name.Value,
			WriteBandwidth: bw,
			ReadBandwidth:  p.positiveSize(w+".read_bandwidth", d.ReadBandwidth, bw),
			Latency:        p.duration(w+".latency", d.Latency, 100*time.Microsecond),
			NrRequests:     int(p.integer(w+".nr_requests", d.NrRequests, 64, 1, 1<<16)),
			MaxRequest:     p.positiveSize(w+".max_request", d.MaxRequest, 1<<20),
		})
		if s.Disks[i].MaxRequest%4096 != 0 && p.err == nil {
			p.fail(w+".max_request", d.MaxRequest, "a multiple of the 4K page")
		}
	}
	paths := map[string]bool{"/": true}
	for i, c := range f.Cgroups {
		w := fmt.Sprintf("cgroups[%d]", i)
		pth := c.Path.Value
		if !c.Path.Set || !strings.HasPrefix(pth, "/") || path.Clean(pth) != pth || pth == "/" {
			p.fail(w+".path", c.Path, "a clean path below / such as /x1 (parents listed first)")
			continue
		}
		if paths[pth] {
			p.fail(w+".path", c.Path, "a path not listed before")
		}
		if !paths[path.Dir(pth)] {
			p.fail(w+".path", c.Path, "a path whose parent "+path.Dir(pth)+" is listed before it")
		}
		paths[pth] = true
		cg := Cgroup{Path: pth,
			Limit: p.size(w+".limit", c.Limit, memcg.NoLimit),
			High:  p.size(w+".high", c.High, memcg.NoLimit),
			Count: int(p.integer(w+".count", c.Count, 0, 0, 1_000_000)),
			Knobs: p.knobs(w+".knobs", c.Knobs),
		}
		if cg.High != memcg.NoLimit && s.Machine.Cgroup == 1 && p.err == nil {
			p.fail(w+".high", c.High, "max on cgroup v1 (memory.high is v2 only)")
		}
		s.Cgroups = append(s.Cgroups, cg)
	}
	if s.Machine.JournalCommit%4096 != 0 && p.err == nil {
		p.fail("machine.journal_commit", m.JournalCommit, "a multiple of the 4K page, such as 16K")
	}
	cpuPaths := map[string]bool{}
	for i, g := range f.CPUGroups {
		w := fmt.Sprintf("cpu_groups[%d]", i)
		pth := g.Path.Value
		if !g.Path.Set || !strings.HasPrefix(pth, "/") || path.Clean(pth) != pth || pth == "/" || cpuPaths[pth] {
			p.fail(w+".path", g.Path, "a clean path below / such as /batch/writer, not listed before")
			continue
		}
		cpuPaths[pth] = true
		c := CPUGroup{Path: pth, Max: CPUMax{Quota: -1, Period: 100000}}
		if g.Max.Set {
			c.Max = p.cpuMax(w+".max", g.Max)
		}
		s.CPUGroups = append(s.CPUGroups, c)
	}
	names := map[string]bool{}
	for i, wl := range f.Workloads {
		w := fmt.Sprintf("workloads[%d]", i)
		x := Workload{Name: wl.Name.Value}
		if !wl.Name.Set || names[x.Name] {
			p.fail(w+".name", wl.Name, "a name not used by another workload")
		}
		names[x.Name] = true
		x.Kind = p.oneOf(w+".kind", wl.Kind, "", KindWriter, KindReader, KindAnon, KindBuild, KindDirtier, KindSleeper, KindWAL)
		if !wl.Kind.Set {
			p.fail(w+".kind", scalar{Line: wl.Name.Line}, "one of writer, reader, anon, build, dirtier, sleeper, wal")
		}
		x.Cgroup = wl.Cgroup.Value
		if !wl.Cgroup.Set {
			x.Cgroup = "/"
		}
		if !paths[x.Cgroup] {
			p.fail(w+".cgroup", wl.Cgroup, "a path listed under cgroups, or /")
		}
		x.Disk = wl.Disk.Value
		if !wl.Disk.Set && len(s.Disks) > 0 {
			x.Disk = s.Disks[0].Name
		}
		if !disks[x.Disk] {
			p.fail(w+".disk", wl.Disk, "a disk name listed under disks")
		}
		x.Size = p.size(w+".size", wl.Size, 0)
		x.Block = p.positiveSize(w+".block", wl.Block, 16<<10)
		x.Rate = p.size(w+".rate", wl.Rate, 0)
		x.Accesses = int(p.integer(w+".accesses", wl.Accesses, 0, 0, 64))
		x.Start = p.duration(w+".start", wl.Start, 0)
		x.Hold = p.duration(w+".hold", wl.Hold, 0)
		x.Compile = p.duration(w+".compile", wl.Compile, 20*time.Millisecond)
		x.Jobs = int(p.integer(w+".jobs", wl.Jobs, 100, 1, 1_000_000))
		x.Interval = p.duration(w+".interval", wl.Interval, time.Millisecond)
		x.Duration = p.duration(w+".duration", wl.Duration, 0)
		x.CPUGroup = wl.CPUGroup.Value
		if wl.CPUGroup.Set && !cpuPaths[x.CPUGroup] && p.err == nil {
			p.fail(w+".cpu_group", wl.CPUGroup, "a path listed under cpu_groups")
		}
		if (x.Kind == KindSleeper || x.Kind == KindWAL) && x.Duration <= 0 && p.err == nil {
			p.fail(w+".duration", scalar{Value: wl.Duration.Value, Line: max(wl.Duration.Line, wl.Kind.Line)}, "a positive duration such as 20s")
		}
		if x.Kind == KindSleeper && x.Interval <= 0 && p.err == nil {
			p.fail(w+".interval", wl.Interval, "a positive duration such as 1ms")
		}
		if (x.Kind == KindWriter || x.Kind == KindReader || x.Kind == KindAnon || x.Kind == KindDirtier) && x.Size == 0 && p.err == nil {
			p.fail(w+".size", scalar{Value: wl.Size.Value, Line: max(wl.Size.Line, wl.Kind.Line)}, "a positive size such as 20G")
		}
		if x.Size == memcg.NoLimit && p.err == nil {
			p.fail(w+".size", wl.Size, "a finite size")
		}
		s.Workloads = append(s.Workloads, x)
	}
	if len(f.Variants) == 0 {
		s.Variants = []Variant{{Name: "stock"}}
	}
	vnames := map[string]bool{}
	for i, v := range f.Variants {
		w := fmt.Sprintf("variants[%d]", i)
		x := Variant{Name: v.Name.Value}
		if !v.Name.Set || vnames[x.Name] || strings.ContainsAny(x.Name, ",= /") {
			p.fail(w+".name", v.Name, "a name without spaces, commas, = or /, not used by another variant")
		}
		vnames[x.Name] = true
		for j, kv := range v.Kernel {
			x.Kernel = append(x.Kernel, p.oneOf(fmt.Sprintf("%s.kernel[%d]", w, j), kv, "", KernelSeed000, KernelSeed001, KernelSeed004, KernelThrottle2633))
		}
		if v.Memcgd != nil {
			x.Memcgd = &Memcgd{
				Interval: p.duration(w+".memcgd.interval", v.Memcgd.Interval, 50*time.Millisecond),
				Latency:  p.duration(w+".memcgd.latency", v.Memcgd.Latency, time.Millisecond),
				Tracker:  p.oneOf(w+".memcgd.tracker", v.Memcgd.Tracker, "true", "true", "false") == "true",
				Pace:     p.oneOf(w+".memcgd.pace", v.Memcgd.Pace, "true", "true", "false") == "true",
			}
			if x.Memcgd.Interval <= 0 && p.err == nil {
				p.fail(w+".memcgd.interval", v.Memcgd.Interval, "a positive duration such as 50ms")
			}
			if len(x.Kernel) > 0 && p.err == nil {
				p.fail(w+".kernel", v.Kernel[0], "no seed kernel options with memcgd: the daemon runs on the stock kernel")
			}
		}
		x.Knobs = p.knobs(w+".knobs", v.Knobs)
		if len(v.CPUMax) > 0 {
			x.CPUMax = map[string]CPUMax{}
			keys := make([]string, 0, len(v.CPUMax))
			for k := range v.CPUMax {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !cpuPaths[k] && p.err == nil {
					p.fail(w+".cpu_max", scalar{Value: k, Line: v.CPUMax[k].Line, Set: true}, "cpu.max values keyed by a path listed under cpu_groups")
				}
				x.CPUMax[k] = p.cpuMax(w+".cpu_max."+k, v.CPUMax[k])
			}
		}
		s.Variants = append(s.Variants, x)
	}
	s.Report = Report{
		Table:    p.oneOf("report.table", f.Report.Table, "summary", "summary", KernelSeed000, KernelSeed001, KernelSeed004, TableNoisyNeighbour),
		Focus:    f.Report.Focus.Value,
		Workload: f.Report.Workload.Value,
		Warmup:   p.duration("report.warmup", f.Report.Warmup, 0),
	}
	if s.Report.Workload == "" && len(s.Workloads) > 0 {
		s.Report.Workload = s.Workloads[0].Name
	}
	if !names[s.Report.Workload] && p.err == nil {
		p.fail("report.workload", f.Report.Workload, "a workload name")
	}
	if s.Report.Focus == "" {
		for _, wl := range s.Workloads {
			if wl.Name == s.Report.Workload {
				s.Report.Focus = wl.Cgroup
			}
		}
	}
	if !paths[s.Report.Focus] && p.err == nil {
		p.fail("report.focus", f.Report.Focus, "a path listed under cgroups, or /")
	}
	return s
}
