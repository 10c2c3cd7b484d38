package vm

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestShellQuoteSurvivesTheShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	words := []string{"", "plain", "two words", "it's", `"double"`, "$HOME", "a\\b", "new\nline", "'", "TestA|TestB$"}
	var script strings.Builder
	script.WriteString("printf '%s\\0'")
	for _, w := range words {
		script.WriteString(" " + shellQuote(w))
	}
	out, err := exec.Command(sh, "-c", script.String()).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if strings.Join(got, "|") != strings.Join(words, "|") || len(got) != len(words) {
		t.Errorf("shell read %q, want %q", got, words)
	}
}

func TestJobValidate(t *testing.T) {
	tests := []struct {
		job     Job
		wantErr string // "" means valid
	}{
		{Job{Name: "cgroupfs_format", Dir: "/src/cgroupfs/format", Args: []string{"/tests/x.test"}}, ""},
		{Job{Name: "", Dir: "/", Args: []string{"true"}}, `job name ""`},
		{Job{Name: "a b", Dir: "/", Args: []string{"true"}}, `job name "a b"`},
		{Job{Name: "a", Dir: "src", Args: []string{"true"}}, `dir "src": want an absolute path`},
		{Job{Name: "a", Dir: "/"}, "args empty"},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Files: map[string]string{"tests/x": "/x"}}, `file "tests/x"`},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Env: []string{"MEMCGD_OVERHEAD=1", "_X9="}}, ""},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Env: []string{"MEMCGD_OVERHEAD"}}, `env "MEMCGD_OVERHEAD": want NAME=VALUE`},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Env: []string{"=1"}}, `name "": want [A-Z_][A-Z0-9_]*`},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Env: []string{"9X=1"}}, `name "9X"`},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Env: []string{"lower=1"}}, `name "lower"`},
		{Job{Name: "a", Dir: "/", Args: []string{"true"}, Env: []string{"A B=1"}}, `name "A B"`},
		{Job{Name: "a", Dir: "/", Args: []string{"/x=y/cmd"}, Env: []string{"A=1"}}, `command "/x=y/cmd" holds '='`},
		{Job{Name: "a", Dir: "/", Args: []string{"/x=y/cmd"}}, ""},
	}
	for _, tt := range tests {
		err := tt.job.validate()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v: validate() = %v, want %q", tt.job, err, tt.wantErr)
		}
	}
}

func TestCheckEnv(t *testing.T) {
	tests := []struct {
		kv      string
		wantErr string // "" means valid
	}{
		{"MEMCGD_OVERHEAD=1", ""},
		{"MEMCGD_OVERHEAD_SIZES=100,1000", ""},
		{"_=", ""},
		{"A=b=c", ""},
		{"X1=two words", ""},
		{"NOVALUE", "want NAME=VALUE"},
		{"", "want NAME=VALUE"},
		{"=1", `name ""`},
		{"1X=1", `name "1X"`},
		{"memcgd=1", `name "memcgd"`},
		{"A-B=1", `name "A-B"`},
		{"A B=1", `name "A B"`},
		{"É=1", `name "É"`},
	}
	for _, tt := range tests {
		err := CheckEnv(tt.kv)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckEnv(%q) = %v, want %q", tt.kv, err, tt.wantErr)
		}
	}
}

// TestJobsScriptEnvReachesTheCommand sources a job line with Env through a
// stand-in for init.sh's job function and checks the command sees each
// value as it was given, next to the environment it inherits.
func TestJobsScriptEnvReachesTheCommand(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	if _, err := exec.LookPath("env"); err != nil {
		t.Skip("no env on this host")
	}
	j := Job{Name: "x", Dir: "/", Env: []string{"MEMCGD_OVERHEAD=1", "MEMCGD_OVERHEAD_SIZES=100,1000", "Q=it's $HOME"},
		Args: []string{"sh", "-c", `printf '%s\0' "$MEMCGD_OVERHEAD" "$MEMCGD_OVERHEAD_SIZES" "$Q" "$INHERITED"`}}
	script := "job() { shift 2; \"$@\"; }\n" + string(jobsScript([]Job{j}))
	cmd := exec.Command(sh, "-c", script)
	cmd.Env = append(os.Environ(), "INHERITED=yes")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, script)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	want := []string{"1", "100,1000", "it's $HOME", "yes"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the job's command saw %q, want %q", got, want)
	}
}

func TestTestJob(t *testing.T) {
	b := TestBinary{Name: "cgroupfs_format", RelDir: "cgroupfs/format", Path: "/h/bin/cgroupfs_format.test", Testdata: "/h/m/cgroupfs/format/testdata"}
	j := TestJob(b, "TestStat", time.Minute)
	want := Job{
		Name: "cgroupfs_format",
		Dir:  "/src/cgroupfs/format",
		Args: []string{"/tests/cgroupfs_format.test", "-test.v", "-test.timeout=1m0s", "-test.run=TestStat"},
		Files: map[string]string{
			"/tests/cgroupfs_format.test":   "/h/bin/cgroupfs_format.test",
			"/src/cgroupfs/format/testdata": "/h/m/cgroupfs/format/testdata",
		},
	}
	if j.Name != want.Name || j.Dir != want.Dir || strings.Join(j.Args, " ") != strings.Join(want.Args, " ") || len(j.Files) != len(want.Files) {
		t.Fatalf("TestJob = %+v, want %+v", j, want)
	}
	for k, v := range want.Files {
		if j.Files[k] != v {
			t.Errorf("Files[%s] = %q, want %q", k, j.Files[k], v)
		}
	}
	if err := j.validate(); err != nil {
		t.Errorf("TestJob made an invalid job: %v", err)
	}
}
