package control

import (
	"encoding/json"
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
// state.Status.Fields, and what the daemon is doing to the cgroup.
type Report struct {
	Cgroup host.Cgroup
	Fields []memcg.Field
	// Throttle says why the daemon does not throttle the cgroup
	// (state.Status.Throttle), "" when it can.
	Throttle string
	// Managed says whether the config manages the cgroup, and Unmanaged
	// why not (state.Status.Managed, Unmanaged).
	Managed   bool
	Unmanaged string
	// State is what the daemon is doing to the cgroup now (state.StateIdle,
	// ...), "" before its first step or when it is not managed; Since is
	// when that began.
	State string
	Since time.Time
	// DryRun says the daemon runs dry: State and the counters are what it
	// would have done.
	DryRun bool
}

// NewReport is the Report of st, as a client receives it.
func NewReport(st state.Status) Report {
	return Report{
		Cgroup: st.Cgroup, Fields: st.Fields(), Throttle: st.Throttle,
		Managed: st.Managed, Unmanaged: st.Unmanaged, State: st.State, Since: fromUnixNano(unixNano(st.Since)),
		DryRun: st.DryRun,
	}
}

// unixNano is t in nanoseconds since the Unix epoch, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano is the time of unixNano's n, in UTC; 0 is the zero time.
func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
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
	Cgroup     string         `json:"cgroup"`
	Knobs      wireKnobs      `json:"knobs"`
	Overrides  wireKnobs      `json:"overrides"`
	Dirty      wireDirty      `json:"dirty"`
	Watermarks wireWatermarks `json:"watermarks"`
}

// wireKnobs are knobs in memcg.Knobs.Get's text form, sent with the JSON
// type of what each holds (memcg.KnobValue): a ratio or size a number,
// min_free_kbytes a number or "auto", writeback_first a boolean.
type wireKnobs map[string]string

// MarshalJSON types each knob; a value memcg cannot read (which the
// daemon never holds) goes as its string.
func (k wireKnobs) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(k))
	for name, text := range k {
		v, err := memcg.KnobValue(name, text)
		if err != nil {
			v = text
		}
		out[name] = v
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads each knob back into its text form: a string as it
// is, a number or boolean as written.
func (k *wireKnobs) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(wireKnobs, len(raw))
	for name, v := range raw {
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil:
			out[name] = s
		case len(v) > 0 && (v[0] == '{' || v[0] == '[' || string(v) == "null"):
			return fmt.Errorf("knob %s: want a number, a boolean or a string, got %s", name, v)
		default:
			out[name] = string(v)
		}
	}
	*k = out
	return nil
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
// sends 10,000 of them. Names, and the kind of each, are sent only when
// they differ from the previous report's on the connection (in practice:
// once); Unknown lists the indices of the fields that are n/a. Values are
// typed as memcg.Field.JSON types them: numbers, null for a size with no
// limit, booleans for flags.
type wireReport struct {
	Cgroup string   `json:"cgroup"`
	Names  []string `json:"names,omitempty"`
	// Kinds has one letter per name (kindLetters): n a number, b bytes,
	// f a flag.
	Kinds   string    `json:"kinds,omitempty"`
	Values  valueList `json:"values"`
	Unknown []int     `json:"unknown,omitempty"`
	// Throttle is state.Status.Throttle, sent only when set.
	Throttle string `json:"throttle,omitempty"`
	// Managed, Unmanaged, State, Since (in nanoseconds since the Unix
	// epoch) and DryRun are state.Status's; all but Managed are sent only
	// when set.
	Managed   bool   `json:"managed"`
	Unmanaged string `json:"unmanaged,omitempty"`
	State     string `json:"state,omitempty"`
	Since     int64  `json:"since,omitempty"`
	DryRun    bool   `json:"dry_run,omitempty"`
}

// kindLetters are the letters of wireReport.Kinds, indexed by memcg.Kind.
const kindLetters = "nbf"

// fieldNames are the names and kinds of a report's fields, kept from one
// report to the next on a connection.
type fieldNames struct {
	names []string
	kinds string
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

// toWireReport encodes st's fields; names and kinds are sent unless they
// equal *last, which is then updated.
func toWireReport(st state.Status, last *fieldNames) *wireReport {
	fields := st.Fields()
	r := &wireReport{Cgroup: string(st.Cgroup), Values: make(valueList, len(fields)), Throttle: st.Throttle,
		Managed: st.Managed, Unmanaged: st.Unmanaged, State: st.State, Since: unixNano(st.Since), DryRun: st.DryRun}
	kinds := make([]byte, len(fields))
	same := len(last.names) == len(fields)
	for i, f := range fields {
		kinds[i] = kindLetters[f.Kind]
		switch {
		case f.Kind == memcg.KindFlag && f.Value != 0:
			r.Values[i] = value{kind: valueTrue}
		case f.Kind == memcg.KindFlag:
			r.Values[i] = value{kind: valueFalse}
		case f.Kind == memcg.KindBytes && f.Value == memcg.NoLimit:
			r.Values[i] = value{kind: valueNull}
		default:
			r.Values[i] = value{n: f.Value}
		}
		if !f.Known {
			r.Unknown = append(r.Unknown, i)
		}
		same = same && last.names[i] == f.Name
	}
	if !same || last.kinds != string(kinds) {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Name
		}
		r.Names, r.Kinds = names, string(kinds)
		*last = fieldNames{names, r.Kinds}
	}
	return r
}

// report decodes w, with the names of the previous report on the
// connection unless w brings its own; *last is updated.
func (w *wireReport) report(last *fieldNames) (Report, error) {
	if w.Names != nil {
		if len(w.Kinds) != len(w.Names) {
			return Report{}, fmt.Errorf("report of %s: %d kinds for %d field names", w.Cgroup, len(w.Kinds), len(w.Names))
		}
		*last = fieldNames{w.Names, w.Kinds}
	}
	names := last.names
	if len(names) != len(w.Values) {
		return Report{}, fmt.Errorf("report of %s: %d values for %d field names", w.Cgroup, len(w.Values), len(names))
	}
	r := Report{Cgroup: host.Cgroup(w.Cgroup), Fields: make([]memcg.Field, len(names)), Throttle: w.Throttle,
		Managed: w.Managed, Unmanaged: w.Unmanaged, State: w.State, Since: fromUnixNano(w.Since), DryRun: w.DryRun}
	for i, name := range names {
		f := memcg.Field{Name: name, Known: true}
		v := w.Values[i]
		switch k := last.kinds[i]; {
		case k == 'f' && (v.kind == valueTrue || v.kind == valueFalse):
			f.Kind, f.Value = memcg.KindFlag, memcg.Flag(v.kind == valueTrue)
		case k == 'b' && v.kind == valueNull:
			f.Kind, f.Value = memcg.KindBytes, memcg.NoLimit
		case k == 'b' && v.kind == valueNumber:
			f.Kind, f.Value = memcg.KindBytes, v.n
		case k == 'n' && v.kind == valueNumber:
			f.Kind, f.Value = memcg.KindNumber, v.n
		default:
			return Report{}, fmt.Errorf("report of %s: field %s of kind %q has a value of the wrong type", w.Cgroup, name, k)
		}
		r.Fields[i] = f
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
