package control

import (
	"errors"
	"fmt"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/memcgd/control.sock"

// MaxRequestSize bounds one request line; a longer one is refused and the
// connection closed. Knob settings for one cgroup fit in a few hundred
// bytes.
const MaxRequestSize = 64 << 10

// ReadTimeout is how long the server waits for each request, and
// WriteTimeout how long for each response to be taken.
const (
	ReadTimeout  = 5 * time.Second
	WriteTimeout = 5 * time.Second
)

// Operations, the "op" of a request.
const (
	OpSet   = "set"
	OpGet   = "get"
	OpReset = "reset"
	OpStat  = "stat"
)

// GetResult is one cgroup's settings as the socket returns them: every knob
// in force, the overrides among them, and the thresholds and watermarks in
// bytes. It is state.Settings, so that the agent can implement Backend
// without importing this package.
type GetResult = state.Settings

// Report is one cgroup's statistics in `memcgd stat` form: the fields of
// state.Status.Fields.
type Report struct {
	Cgroup host.Cgroup
	Fields []memcg.Field
	// Throttle says why the daemon does not throttle the cgroup
	// (state.Status.Throttle), "" when it can.
	Throttle string
}

// request is one request line.
type request struct {
	Op     string            `json:"op"`
	Cgroup string            `json:"cgroup"`
	Knobs  map[string]string `json:"knobs,omitempty"`
}

// response is one response line: Error, or the result of the op.
type response struct {
	Error string `json:"error,omitempty"`
	// Invalid details a refused knob value; UnknownKnob names a knob
	// that does not exist.
	Invalid     *invalid      `json:"invalid,omitempty"`
	UnknownKnob string        `json:"unknown_knob,omitempty"`
	Settings    *wireSettings `json:"settings,omitempty"`
	// Stat is one cgroup's report: the answer to a stat request is one
	// response per cgroup, streamed, then one with End set, so that
	// neither side holds the reports of every cgroup at once.
	Stat *wireReport `json:"stat,omitempty"`
	End  bool        `json:"end,omitempty"`
}

type invalid struct {
	Knob    string `json:"knob"`
	Value   string `json:"value"`
	Allowed string `json:"allowed"`
}

type wireSettings struct {
	Cgroup     string            `json:"cgroup"`
	Knobs      map[string]string `json:"knobs"`
	Overrides  map[string]string `json:"overrides"`
	Dirty      wireDirty         `json:"dirty"`
	Watermarks wireWatermarks    `json:"watermarks"`
}

type wireDirty struct {
	Background uint64 `json:"background_bytes"`
	Limit      uint64 `json:"limit_bytes"`
}

type wireWatermarks struct {
	Min  uint64 `json:"min_bytes"`
	Low  uint64 `json:"low_bytes"`
	High uint64 `json:"high_bytes"`
}

// wireReport is one cgroup's report, compact: a stat of 10,000 cgroups
// sends 10,000 of them. Names are sent only when they differ from the
// previous report's on the connection (in practice: once); Unknown lists
// the indices of the fields that are n/a.
type wireReport struct {
	Cgroup  string   `json:"cgroup"`
	Names   []string `json:"names,omitempty"`
	Values  uintList `json:"values"`
	Unknown []int    `json:"unknown,omitempty"`
	// Throttle is state.Status.Throttle, sent only when set.
	Throttle string `json:"throttle,omitempty"`
}

func toWireSettings(s GetResult) *wireSettings {
	return &wireSettings{
		Cgroup:     string(s.Cgroup),
		Knobs:      s.Knobs,
		Overrides:  s.Overrides,
		Dirty:      wireDirty{Background: s.Dirty.Background, Limit: s.Dirty.Limit},
		Watermarks: wireWatermarks{Min: s.Watermarks.Min, Low: s.Watermarks.Low, High: s.Watermarks.High},
	}
}

func (w *wireSettings) settings() GetResult {
	s := GetResult{
		Cgroup:     host.Cgroup(w.Cgroup),
		Knobs:      w.Knobs,
		Overrides:  w.Overrides,
		Dirty:      memcg.DirtyLimits{Background: w.Dirty.Background, Limit: w.Dirty.Limit},
		Watermarks: memcg.Watermarks{Min: w.Watermarks.Min, Low: w.Watermarks.Low, High: w.Watermarks.High},
	}
	if s.Knobs == nil {
		s.Knobs = map[string]string{}
	}
	if s.Overrides == nil {
		s.Overrides = map[string]string{}
	}
	return s
}

// toWireReport encodes st's fields; names are sent unless they equal
// *last, which is then updated.
func toWireReport(st state.Status, last *[]string) *wireReport {
	fields := st.Fields()
	r := &wireReport{Cgroup: string(st.Cgroup), Values: make(uintList, len(fields)), Throttle: st.Throttle}
	same := len(*last) == len(fields)
	for i, f := range fields {
		r.Values[i] = f.Value
		if !f.Known {
			r.Unknown = append(r.Unknown, i)
		}
		same = same && (*last)[i] == f.Name
	}
	if !same {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Name
		}
		r.Names, *last = names, names
	}
	return r
}

// report decodes w, with the names of the previous report on the
// connection unless w brings its own; *last is updated.
func (w *wireReport) report(last *[]string) (Report, error) {
	if w.Names != nil {
		*last = w.Names
	}
	names := *last
	if len(names) != len(w.Values) {
		return Report{}, fmt.Errorf("report of %s: %d values for %d field names", w.Cgroup, len(w.Values), len(names))
	}
	r := Report{Cgroup: host.Cgroup(w.Cgroup), Fields: make([]memcg.Field, len(names)), Throttle: w.Throttle}
	for i, name := range names {
		r.Fields[i] = memcg.Field{Name: name, Value: w.Values[i], Known: true}
	}
	for _, i := range w.Unknown {
		if i < 0 || i >= len(names) {
			return Report{}, fmt.Errorf("report of %s: unknown field index %d of %d", w.Cgroup, i, len(names))
		}
		r.Fields[i].Known = false
	}
	return r, nil
}

// errorResponse carries err, with a refused knob's details apart.
func errorResponse(err error) response {
	r := response{Error: err.Error()}
	var ke *memcg.KnobError
	if errors.As(err, &ke) {
		r.Invalid = &invalid{Knob: ke.Knob, Value: ke.Value, Allowed: ke.Allowed}
	}
	var ue *memcg.UnknownKnobError
	if errors.As(err, &ue) {
		r.UnknownKnob = ue.Knob
	}
	return r
}

// err rebuilds the error of a response: a *memcg.KnobError when a knob's
// value was refused, a *memcg.UnknownKnobError when the knob does not
// exist, so that callers can tell which.
func (r response) err() error {
	if r.UnknownKnob != "" {
		ue := &memcg.UnknownKnobError{Knob: r.UnknownKnob}
		if ue.Error() == r.Error {
			return ue
		}
		return &remoteError{msg: r.Error, cause: ue}
	}
	if r.Invalid != nil {
		ke := &memcg.KnobError{Knob: r.Invalid.Knob, Value: r.Invalid.Value, Allowed: r.Invalid.Allowed}
		if ke.Error() == r.Error {
			return ke
		}
		return &remoteError{msg: r.Error, cause: ke}
	}
	return &remoteError{msg: r.Error}
}

// remoteError is an error the daemon sent back.
type remoteError struct {
	msg   string
	cause error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cause }
