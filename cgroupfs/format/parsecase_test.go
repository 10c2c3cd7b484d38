package format

import (
	"strings"
	"testing"
)

// parseCase is one row of a parser's table test: an input, and the value
// the parser must fill in, or a substring of the error it must return.
type parseCase[T comparable] struct {
	name    string
	in      []byte
	want    T
	wantErr string
}

// runParseCases runs parse over each case, into a value that starts as
// dirty (set to something the parser must overwrite or reset).
func runParseCases[T comparable](t *testing.T, cases []parseCase[T], dirty T, parse func([]byte, *T) error) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got := dirty
			err := parse(tt.in, &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
