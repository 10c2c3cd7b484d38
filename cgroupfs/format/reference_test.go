package format

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// This file holds the tests' reference parsers: slow, obviously correct
// versions built on strings and strconv, against which the hand-written
// zero-allocation parsers are checked on fixtures and fuzzed input.

// fixture reads a file under testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// addFixtures seeds a fuzz corpus with every file matching the patterns.
func addFixtures(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		names, err := filepath.Glob(filepath.Join("testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// lines splits a file into lines as the kernel prints them: each ends in a
// newline, which the last may lack.
func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// refKeyed parses a flat keyed file into a map. A known key's value must
// be a decimal uint64; any line must be "key value" with both non-empty.
func refKeyed(b []byte, known func(string) bool) (map[string]uint64, error) {
	m := map[string]uint64{}
	for i, line := range lines(b) {
		k, v, ok := strings.Cut(line, " ")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("line %d %q: not key value", i+1, line)
		}
		if !known(k) {
			continue
		}
		if v[0] < '0' || v[0] > '9' { // strconv accepts no sign in base 10, but be explicit
			return nil, fmt.Errorf("line %d %q: not a number", i+1, line)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, line, err)
		}
		m[k] = n
	}
	return m, nil
}

// refDecimal parses what parseDecimal accepts: digits[.digits] with at most
// 15 digits once leading zeros of the integer part are dropped.
func refDecimal(s string) (float64, error) {
	ip, fp, dot := strings.Cut(s, ".")
	if ip == "" || (dot && fp == "") || strings.Trim(ip+fp, "0123456789") != "" {
		return 0, errors.New("bad decimal")
	}
	t := strings.TrimLeft(ip, "0")
	if t == "" {
		t = "0"
	}
	if len(t)+len(fp) > 15 {
		return 0, errors.New("too precise")
	}
	return strconv.ParseFloat(s, 64)
}

// refPSI parses a PSI file as ParsePSI should.
func refPSI(b []byte) (PSI, error) {
	var p PSI
	for i, line := range lines(b) {
		kind, rest, ok := strings.Cut(line, " ")
		if !ok || kind == "" || rest == "" {
			return PSI{}, fmt.Errorf("line %d: not kind fields", i+1)
		}
		var l *PSILine
		switch kind {
		case "some":
			l = &p.Some
		case "full":
			l, p.HasFull = &p.Full, true
		default:
			continue
		}
		for _, f := range strings.Split(rest, " ") {
			name, v, ok := strings.Cut(f, "=")
			if !ok {
				return PSI{}, fmt.Errorf("line %d: field %q has no =", i+1, f)
			}
			var err error
			switch name {
			case "avg10":
				l.Avg10, err = refDecimal(v)
			case "avg60":
				l.Avg60, err = refDecimal(v)
			case "avg300":
				l.Avg300, err = refDecimal(v)
			case "total":
				if v == "" || v[0] < '0' || v[0] > '9' {
					err = errors.New("not a number")
				} else {
					l.Total, err = strconv.ParseUint(v, 10, 64)
				}
			}
			if err != nil {
				return PSI{}, fmt.Errorf("line %d: %w", i+1, err)
			}
		}
	}
	return p, nil
}
