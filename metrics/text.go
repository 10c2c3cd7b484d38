package metrics

import (
	"context"
	"io"
	"math"
	"strconv"

	"github.com/memcgd/memcgd/state"
)

// flushAt is how much text the writer gathers before it writes: large
// enough for few syscalls, small enough that a scrape of 10,000 cgroups
// (about 20 MB of text) never sits in memory at once.
const flushAt = 32 << 10

// textWriter writes the Prometheus text exposition format (version 0.0.4)
// into a reused buffer.
type textWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (t *textWriter) flush() {
	if t.err == nil && len(t.buf) > 0 {
		_, t.err = t.w.Write(t.buf)
	}
	t.buf = t.buf[:0]
}

func (t *textWriter) maybeFlush() {
	if len(t.buf) >= flushAt {
		t.flush()
	}
}

// header writes a family's HELP and TYPE lines.
func (t *textWriter) header(f *family) {
	t.buf = append(t.buf, "# HELP "...)
	t.buf = append(t.buf, f.name...)
	t.buf = append(t.buf, ' ')
	t.buf = appendEscaped(t.buf, f.help, false)
	t.buf = append(t.buf, "\n# TYPE "...)
	t.buf = append(t.buf, f.name...)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, f.typ...)
	t.buf = append(t.buf, '\n')
}

// sample writes name{cgroup="cg"[,label="lv"]} v.
func (t *textWriter) sample(f *family, cg, lv string, v float64) {
	t.buf = append(t.buf, f.name...)
	t.buf = append(t.buf, `{cgroup="`...)
	t.buf = appendEscaped(t.buf, cg, true)
	if f.label != "" {
		t.buf = append(t.buf, `",`...)
		t.buf = append(t.buf, f.label...)
		t.buf = append(t.buf, `="`...)
		t.buf = append(t.buf, lv...)
	}
	t.buf = append(t.buf, `"} `...)
	t.buf = appendFloat(t.buf, v)
	t.buf = append(t.buf, '\n')
}

// appendEscaped escapes as the text format wants: backslash and newline
// everywhere, the double quote in label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats v as the text format reads it: an integer in
// decimal (most samples are byte and event counts, and this is the fast
// path), anything else in the shortest 'g' form, +Inf, -Inf, NaN.
func appendFloat(b []byte, v float64) []byte {
	const exact = 1 << 53 // integers up to here are exact in a float64
	switch {
	case v == math.Trunc(v) && math.Abs(v) < exact:
		return strconv.AppendInt(b, int64(v), 10)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// writeCgroups writes every family's samples of the managed cgroups of sts,
// family by family as the format wants, and returns how many managed
// cgroups were left out for a name that is not valid UTF-8. It stops early,
// returning ctx's error, once ctx is done.
//
// Why leave such a cgroup out rather than escape its name: a label value
// must be UTF-8, and any escape of the bad bytes is a name another cgroup
// (a tenant's sibling) could take, giving two series the same labels. The
// cgroup is still counted, and shown by `memcgd stat`.
func writeCgroups(ctx context.Context, w io.Writer, fams []family, sts []state.Status) (skipped int, err error) {
	t := &textWriter{w: w, buf: make([]byte, 0, flushAt+4096)}
	// Which cgroups to write, decided once: a bit per cgroup, not a
	// map of them.
	export := make([]bool, len(sts))
	for i := range sts {
		switch {
		case !sts[i].Managed:
		case !sts[i].Cgroup.Valid():
			skipped++
		default:
			export[i] = true
		}
	}
	for fi := range fams {
		f := &fams[fi]
		wrote := false
		var cg string
		emit := func(lv string, v float64) { t.sample(f, cg, lv, v) }
		for i := range sts {
			st := &sts[i]
			if !export[i] {
				continue
			}
			if !wrote {
				t.header(f)
				wrote = true
			}
			cg = string(st.Cgroup)
			f.samples(st, emit)
			t.maybeFlush()
			if t.err != nil {
				return skipped, t.err
			}
			if i%256 == 0 && ctx.Err() != nil {
				return skipped, ctx.Err()
			}
		}
	}
	t.flush()
	return skipped, t.err
}
