package lab

import (
	"strings"
	"testing"
	"time"
)

func TestParseJournalInfo(t *testing.T) {
	// fs/jbd2/journal.c jbd2_seq_info_show, a 6.1 kernel's journal.
	full := `3124 transactions (3120 requested), each up to 8192 blocks
average: 
  0ms waiting for transaction
  0ms request delay
  4ms running transaction
  0ms transaction was being locked
  0ms flushing data (in ordered mode)
  8ms logging transaction
  5123us average transaction commit time
  3 handles per transaction
  2 blocks per transaction
  3 logged blocks per transaction
`
	for _, tc := range []struct {
		name, in string
		want     JournalStats
		errPart  string
	}{
		{name: "committed", in: full, want: JournalStats{Transactions: 3124, Requested: 3120, CommitTime: 5123 * time.Microsecond}},
		{name: "none yet", in: "0 transactions (0 requested), each up to 8192 blocks\n", want: JournalStats{}},
		{name: "not jbd2's", in: "hello\n", errPart: `first line "hello"`},
		{name: "bad commit time", in: "1 transactions (1 requested), each up to 8192 blocks\n  xus average transaction commit time\n", errPart: `"x" is not a whole number`},
	} {
		got, err := parseJournalInfo(tc.in)
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("%s: parseJournalInfo = %+v, %v; want an error with %q", tc.name, got, err, tc.errPart)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: parseJournalInfo = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}
