package vm

import (
	"strings"
	"testing"
)

func TestParseReport(t *testing.T) {
	jobs := []Job{{Name: "a"}, {Name: "b"}}
	const pass = "=== RUN   TestX\n--- PASS: TestX (0.00s)\nPASS\n"
	tests := []struct {
		name    string
		stream  string
		console string
		want    map[string]string // job -> substring of Problem; "" for passed
		wantErr []string          // substrings of Report.Err; none means nil
	}{
		{
			name: "every job ends with exit 0 and the VM finishes: pass",
			stream: "@@memcgd-vm ready\n@@memcgd-vm begin a\n" + pass + "@@memcgd-vm end a exit=0\n" +
				"@@memcgd-vm begin b\n" + pass + "@@memcgd-vm end b exit=0\n@@memcgd-vm done\n",
			want: map[string]string{"a": "", "b": ""},
		},
		{
			name: "a non-zero exit fails that job only",
			stream: "@@memcgd-vm ready\n@@memcgd-vm begin a\n--- FAIL: TestX (0.00s)\nFAIL\n@@memcgd-vm end a exit=1\n" +
				"@@memcgd-vm begin b\n" + pass + "@@memcgd-vm end b exit=0\n@@memcgd-vm done\n",
			want:    map[string]string{"a": "exit status 1", "b": ""},
			wantErr: []string{"a: exit status 1"},
		},
		{
			name: "a FAIL line fails the job even with exit 0",
			stream: "@@memcgd-vm ready\n@@memcgd-vm begin a\n    --- FAIL: TestX/sub (0.00s)\n@@memcgd-vm end a exit=0\n" +
				"@@memcgd-vm begin b\npanic: boom\n@@memcgd-vm end b exit=0\n@@memcgd-vm done\n",
			want:    map[string]string{"a": "--- FAIL", "b": "panic: boom"},
			wantErr: []string{"a: exit status 0 but output has", "b: exit status 0 but output has"},
		},
		{
			name:    "the VM dies inside a job: it did not finish, the next never started",
			stream:  "@@memcgd-vm ready\n@@memcgd-vm begin a\n=== RUN   TestX\n",
			console: "[    2.9] Kernel panic - not syncing: sysrq triggered crash\n",
			want:    map[string]string{"a": "did not finish", "b": "never started"},
			wantErr: []string{"kernel: [    2.9] Kernel panic", "before the done marker"},
		},
		{
			name: "output without a final newline runs into the end marker and is kept",
			stream: "@@memcgd-vm ready\n@@memcgd-vm begin a\nPASS@@memcgd-vm end a exit=0\n" +
				"@@memcgd-vm begin b\n@@memcgd-vm end b exit=0\n@@memcgd-vm done\n",
			want: map[string]string{"a": "", "b": ""},
		},
		{
			name:    "a setup error from /init fails every job",
			stream:  "@@memcgd-vm error mount /dev/vda on /mnt failed\n",
			want:    map[string]string{"a": "never started", "b": "never started"},
			wantErr: []string{"VM setup: mount /dev/vda on /mnt failed"},
		},
		{
			name: "a kernel oops fails the run though every job passed",
			stream: "@@memcgd-vm ready\n@@memcgd-vm begin a\n@@memcgd-vm end a exit=0\n" +
				"@@memcgd-vm begin b\n@@memcgd-vm end b exit=0\n@@memcgd-vm done\n",
			console: "[ 1.0] BUG: kernel NULL pointer dereference, address: 0000000000000000\n",
			want:    map[string]string{"a": "", "b": ""},
			wantErr: []string{"kernel: [ 1.0] BUG: kernel NULL pointer"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseReport(jobs, []byte(tt.stream), []byte(tt.console))
			for _, res := range r.Results {
				want := tt.want[res.Name]
				if want == "" && !res.Passed() || want != "" && !strings.Contains(res.Problem, want) {
					t.Errorf("job %s: problem %q, want %q", res.Name, res.Problem, want)
				}
			}
			err := r.Err()
			if len(tt.wantErr) == 0 && err != nil {
				t.Errorf("Err() = %v, want nil", err)
			}
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Err() = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestParseReportKeepsEachJobsOutput(t *testing.T) {
	stream := "noise before\n@@memcgd-vm ready\n@@memcgd-vm begin a\nline 1\nline 2\n@@memcgd-vm end a exit=0\n" +
		"between\n@@memcgd-vm begin b\nlast@@memcgd-vm end b exit=3\n@@memcgd-vm done\n"
	r := parseReport([]Job{{Name: "a"}, {Name: "b"}}, []byte(stream), nil)
	for i, want := range []string{"line 1\nline 2\n", "last\n"} {
		if got := string(r.Results[i].Output); got != want {
			t.Errorf("job %s output %q, want %q", r.Results[i].Name, got, want)
		}
	}
	if r.Results[1].Exit != 3 {
		t.Errorf("job b exit %d, want 3", r.Results[1].Exit)
	}
}
