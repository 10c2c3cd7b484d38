package format

import (
	"bytes"
	"errors"
)

// PSI is a pressure stall information file: /proc/pressure/{cpu,memory,io}
// or a cgroup's cpu.pressure, memory.pressure, io.pressure
// (kernel/sched/psi.c, psi_show; Documentation/accounting/psi.rst):
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
type PSI struct {
	// Some is the share of time at least one task stalled on the resource.
	Some PSILine
	// Full is the share of time all non-idle tasks stalled at once.
	Full PSILine
	// HasFull reports the "full" line; /proc/pressure/cpu had none
	// before 5.13.
	HasFull bool
}

// PSILine is one line of a PSI file.
type PSILine struct {
	// Avg10, Avg60 and Avg300 are running averages of the stall share, in
	// percent, over 10 s, 60 s and 300 s.
	Avg10, Avg60, Avg300 float64
	// Total is the cumulative stall time in microseconds.
	Total uint64
}

// ParsePSI parses a PSI file into p, which it resets first. Lines other
// than "some" and "full", and fields other than avg10, avg60, avg300 and
// total, are ignored.
func ParsePSI(b []byte, p *PSI) error {
	*p = PSI{}
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		kind, fields, ok := keyValue(line)
		if !ok {
			return lineError("pressure", n, line, `"some|full name=value..."`)
		}
		var l *PSILine
		switch string(kind) {
		case "some":
			l = &p.Some
		case "full":
			l, p.HasFull = &p.Full, true
		default:
			continue
		}
		if err := parsePSIFields(fields, l); err != nil {
			return lineError("pressure", n, line, `"some|full avg10=N.NN avg60=N.NN avg300=N.NN total=N"`)
		}
	}
	return nil
}

func parsePSIFields(b []byte, l *PSILine) error {
	for more := true; more; {
		// Fields are separated by single spaces; an empty field, as after
		// a trailing space, is malformed.
		f := b
		if i := bytes.IndexByte(b, ' '); i >= 0 {
			f, b = b[:i], b[i+1:]
		} else {
			more = false
		}
		name, value, ok := bytes.Cut(f, []byte{'='})
		if !ok {
			return errNoEquals
		}
		var err error
		switch string(name) {
		case "avg10":
			l.Avg10, err = parseDecimal(value)
		case "avg60":
			l.Avg60, err = parseDecimal(value)
		case "avg300":
			l.Avg300, err = parseDecimal(value)
		case "total":
			l.Total, err = parseUint(value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var (
	errNoEquals    = errors.New("want name=value")
	errTooPrecise  = errors.New("more than 15 significant digits")
	errBadDecimal  = errors.New("want digits[.digits]")
	pow10          = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}
	maxExactDigits = len(pow10) - 1
)

// parseDecimal parses the kernel's "%lu.%02lu" fixed-point numbers (and any
// digits[.digits] of up to 15 digits) without strconv, which would need a
// string. The digits form an integer below 10^15 < 2^53 and a power of
// ten up to 1e15, both exact in a float64, so their correctly rounded
// quotient equals what strconv.ParseFloat returns.
func parseDecimal(b []byte) (float64, error) {
	intPart, frac, hasDot := bytes.Cut(b, []byte{'.'})
	if len(intPart) == 0 || (hasDot && len(frac) == 0) {
		return 0, errBadDecimal
	}
	if len(intPart)+len(frac) > maxExactDigits {
		// Leading zeros of the integer part are not significant.
		for len(intPart) > 1 && intPart[0] == '0' {
			intPart = intPart[1:]
		}
		if len(intPart)+len(frac) > maxExactDigits {
			return 0, errTooPrecise
		}
	}
	var m uint64
	for _, part := range [2][]byte{intPart, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, errBadDecimal
			}
			m = m*10 + uint64(c-'0')
		}
	}
	return float64(m) / pow10[len(frac)], nil
}
