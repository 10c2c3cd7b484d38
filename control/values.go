package control

import (
	"errors"
	"strconv"
)

// value is one value of a report on the wire: a number, null (a size
// with no limit) or a boolean (a flag), as memcg.Field.JSON types them.
type value struct {
	n    uint64
	kind byte // valueNumber, valueNull, valueTrue or valueFalse
}

const (
	valueNumber byte = iota
	valueNull
	valueTrue
	valueFalse
)

// valueList is a JSON array of values, encoded and decoded by hand: a stat
// of 10,000 cgroups carries 300,000 of them, and encoding/json's
// reflection over a slice was most of the client's time.
type valueList []value

// MarshalJSON writes [v1,v2,...].
func (l valueList) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(l)*12)
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		switch v.kind {
		case valueNull:
			b = append(b, "null"...)
		case valueTrue:
			b = append(b, "true"...)
		case valueFalse:
			b = append(b, "false"...)
		default:
			b = strconv.AppendUint(b, v.n, 10)
		}
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads [v1,v2,...]: decimal integers without sign, fraction
// or exponent, null, true and false, as MarshalJSON writes them.
// encoding/json has already checked that b is valid JSON.
func (l *valueList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return errors.New("values: want an array")
	}
	out := make(valueList, 0, 32)
	body := b[1 : len(b)-1]
	for start := 0; start < len(body); {
		for start < len(body) && isSpace(body[start]) {
			start++
		}
		if start == len(body) {
			break
		}
		end := start
		for end < len(body) && body[end] != ',' {
			end++
		}
		tok := body[start:end]
		for len(tok) > 0 && isSpace(tok[len(tok)-1]) {
			tok = tok[:len(tok)-1]
		}
		switch string(tok) {
		case "null":
			out = append(out, value{kind: valueNull})
		case "true":
			out = append(out, value{kind: valueTrue})
		case "false":
			out = append(out, value{kind: valueFalse})
		default:
			n, err := strconv.ParseUint(string(tok), 10, 64)
			if err != nil {
				return errors.New("values: want unsigned integers, null, true or false, got " + strconv.Quote(string(tok)))
			}
			out = append(out, value{n: n})
		}
		start = end + 1
	}
	*l = out
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
