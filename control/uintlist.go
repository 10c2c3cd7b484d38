package control

import (
	"errors"
	"strconv"
)

// uintList is a JSON array of unsigned integers, encoded and decoded by
// hand: a stat of 10,000 cgroups carries 300,000 of them, and
// encoding/json's reflection over []uint64 was most of the client's time.
type uintList []uint64

// MarshalJSON writes [v1,v2,...].
func (l uintList) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(l)*12)
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, v, 10)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads [v1,v2,...]: decimal integers without sign, fraction
// or exponent, as MarshalJSON writes them. encoding/json has already
// checked that b is valid JSON.
func (l *uintList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return errors.New("values: want an array of unsigned integers")
	}
	out := make(uintList, 0, 32)
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
		num := body[start:end]
		for len(num) > 0 && isSpace(num[len(num)-1]) {
			num = num[:len(num)-1]
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return errors.New("values: want an array of unsigned integers, got " + strconv.Quote(string(num)))
		}
		out = append(out, v)
		start = end + 1
	}
	*l = out
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
