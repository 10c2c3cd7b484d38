package lab

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Flags are the flags every experiment has.
type Flags struct {
	// Scratch is where the experiment's files go (Options.Scratch).
	Scratch string
	// Memcgd is a prebuilt memcgd binary; empty builds ./cmd/memcgd.
	Memcgd string
	// DaemonArgs are extra `memcgd run` flags, space-separated.
	DaemonArgs string
	// Nice is the daemon's nice value (-nice).
	Nice int
	// Runs is how many times the experiment repeats.
	Runs int
	// Arms are the arms to run, comma-separated (ParseArms).
	Arms string
	// CPUHogs is how many busy loops run through every arm (StartHogs).
	CPUHogs int
	// Writer is a prebuilt experiments/writer binary; empty builds it.
	Writer string
	// Victim is a prebuilt experiments/victim binary; empty builds it
	// when UsesVictim.
	Victim string
	// Revision names the source the binaries were built from; empty asks
	// git. Set by -vm, since the VM has no git checkout.
	Revision string
	// VM runs the experiment inside a test VM instead (-vm).
	VM VMFlags
	// VMDefaults are the experiment's flags, by name, scaled to the VM:
	// with -vm they are passed into it unless set on the command line.
	// They are the experiment's to set; they are not flags.
	VMDefaults map[string]string
	// ExtraArms are arms the experiment knows besides KnownArms (e1:
	// SelfPaced). It is the experiment's to set; it is not a flag.
	ExtraArms []Arm
	// UsesVictim says the experiment runs experiments/victim, so that it
	// is built (and put into the VM). The experiment's to set; not a flag.
	UsesVictim bool
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Scratch, "scratch", "/var/tmp", "directory on a disk (not tmpfs) for the experiment's files")
	fs.StringVar(&f.Memcgd, "memcgd", "", "prebuilt memcgd binary (default: go build ./cmd/memcgd)")
	fs.StringVar(&f.DaemonArgs, "daemon-args", "", "extra `memcgd run` flags, space-separated (e.g. \"--active-interval 20ms\")")
	fs.IntVar(&f.Nice, "nice", DeployNice, "nice value the daemon runs at; the default is deploy/memcgd.service's Nice=")
	fs.IntVar(&f.Runs, "runs", 1, "times to repeat the experiment, to show its variance; the summary gives the median of each run's figures")
	fs.StringVar(&f.Arms, "arms", DefaultArms, "arms to run, comma-separated, stock first: stock (no memcgd), memcgd (its defaults: the eBPF tracker where it loads), "+
		"fallback (memcgd "+TrackerOffFlag+")"+extraArmsHelp(f.ExtraArms))
	fs.IntVar(&f.CPUHogs, "cpu-hogs", 0, "busy loops, each in a session of its own, running through every arm: a host whose CPUs other tenants contend for")
	fs.StringVar(&f.Writer, "writer", "", "prebuilt experiments/writer binary (default: go build ./experiments/writer)")
	if f.UsesVictim {
		fs.StringVar(&f.Victim, "victim", "", "prebuilt experiments/victim binary (default: go build ./experiments/victim)")
	}
	fs.StringVar(&f.Revision, "revision", "", "source revision to report (default: from git)")
	f.VM.register(fs)
}

// extraArmsHelp names an experiment's extra arms for -arms' help.
func extraArmsHelp(extra []Arm) string {
	var s string
	for _, a := range extra {
		s += ", " + a.Name
		if a.SelfPaced {
			s += " (no memcgd; the writer paces itself to the dirty limit: the ceiling of any throttle)"
		}
	}
	return s
}

// Bench is what an experiment's body gets: the lab, the built binaries and
// the common flags.
type Bench struct {
	*Lab
	Flags
	// Memcgd, Writer and Victim are the binaries (Victim only with
	// Flags.UsesVictim).
	Memcgd, Writer, Victim string
	// Arms are the arms to run (-arms), stock first.
	Arms []Arm
}

// Main runs an experiment named name (its package path, as
// "./experiments/e1") after flag.Parse: it checks the flags, makes a lab,
// builds the binaries, prints the command and the machine, runs body, and
// closes the lab also on an error or SIGINT/SIGTERM. With -vm it runs the
// experiment inside a test VM instead (runInVM). It exits with status 1 if
// anything failed, cleanup included.
func Main(name string, f Flags, body func(ctx context.Context, b *Bench) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	var err error
	if f.VM.Cgroup != "" {
		err = runInVM(ctx, name, f)
	} else {
		err = run(ctx, name, f, body)
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", err)
	}
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, name string, f Flags, body func(context.Context, *Bench) error) (err error) {
	if f.Runs < 1 {
		return fmt.Errorf("-runs: invalid value %d: want 1 or more", f.Runs)
	}
	if f.CPUHogs < 0 || f.CPUHogs > 64 {
		return fmt.Errorf("-cpu-hogs: invalid value %d: want 0 to 64", f.CPUHogs)
	}
	arms, err := ParseArms(f.Arms, f.ExtraArms...)
	if err != nil {
		return err
	}
	l, err := New(Options{Scratch: f.Scratch, Revision: f.Revision})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	b := &Bench{Lab: l, Flags: f, Memcgd: f.Memcgd, Writer: f.Writer, Victim: f.Victim, Arms: arms}
	if b.Memcgd == "" {
		if b.Memcgd, err = l.Build(ctx, "./cmd/memcgd"); err != nil {
			return err
		}
	}
	if b.Writer == "" {
		if b.Writer, err = l.Build(ctx, "./experiments/writer"); err != nil {
			return err
		}
	}
	if f.UsesVictim && b.Victim == "" {
		if b.Victim, err = l.Build(ctx, "./experiments/victim"); err != nil {
			return err
		}
	}
	desc, err := l.Describe()
	if err != nil {
		return err
	}
	cmd := "go run " + name
	if os.Getenv("MEMCGD_VM") == "1" {
		cmd = "(in the VM) " + os.Args[0] // started by runInVM
	}
	fmt.Printf("$ %s %s\n\n%s\n", cmd, strings.Join(quoteAll(os.Args[1:]), " "), desc)
	if f.CPUHogs > 0 {
		if _, err := l.StartHogs(ctx, f.CPUHogs); err != nil {
			return err
		}
		fmt.Printf("%d CPU hogs (busy loops, each in a session of its own) run through every arm.\n\n", f.CPUHogs)
	}
	return body(ctx, b)
}

// shellQuote quotes s for a POSIX shell when it needs quoting, so that
// the printed command can be pasted back.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
