package vm

import (
	"fmt"
	"strings"
	"testing"
)

func TestFailedOutput(t *testing.T) {
	long := []string{"=== RUN   TestLong"}
	for i := range 150 {
		long = append(long, fmt.Sprintf("    log %d", i))
	}
	long = append(long, "--- FAIL: TestLong (1.00s)")
	for _, tt := range []struct {
		name, out, want string
	}{
		{"all passed", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n", ""},
		{
			"the failed test alone, with its logs",
			"=== RUN   TestA\n    a.go:1: fine\n--- PASS: TestA (0.00s)\n" +
				"=== RUN   TestB\n    b.go:2: wrong\n--- FAIL: TestB (0.10s)\n" +
				"=== RUN   TestC\n--- SKIP: TestC (0.00s)\nFAIL\n",
			"=== RUN   TestB\n    b.go:2: wrong\n--- FAIL: TestB (0.10s)\n",
		},
		{
			"a failed subtest: its parent's whole block",
			"=== RUN   TestA\n=== RUN   TestA/x\n    a.go:3: bad\n    --- FAIL: TestA/x (0.00s)\n--- FAIL: TestA (0.00s)\n",
			"=== RUN   TestA\n=== RUN   TestA/x\n    a.go:3: bad\n    --- FAIL: TestA/x (0.00s)\n--- FAIL: TestA (0.00s)\n",
		},
		{
			"a test that never ended: to the end",
			"=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestP\npanic: boom\n\ngoroutine 1 [running]:\n",
			"=== RUN   TestP\npanic: boom\n\ngoroutine 1 [running]:\n",
		},
		{
			"a long block: its head and tail",
			strings.Join(long, "\n") + "\n",
			strings.Join(long[:20], "\n") + "\n[… 52 lines]\n" + strings.Join(long[len(long)-80:], "\n") + "\n",
		},
	} {
		if got := FailedOutput([]byte(tt.out)); got != tt.want {
			t.Errorf("%s: FailedOutput =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}
