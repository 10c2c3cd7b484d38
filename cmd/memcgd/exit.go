package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memcgd/memcgd/internal/suggest"
)

// memcgd's exit statuses; README.md ("Exit status") and the man pages say
// the same (exitStatusHelp).
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // the command line is wrong: nothing was done
)

// exitStatusHelp ends the root command's help, and so its man page.
const exitStatusHelp = `Exit status: 0 on success; 1 when the command fails (no daemon answers, a
cgroup is gone, a config file is refused); 2 for a wrong command line (an
unknown command or flag, a bad argument or flag value), before doing
anything.`

// usageError is a wrong command line: an unknown command or flag, a bad
// argument, a bad flag value.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage marks err, if not nil, as a wrong command line.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// usagef is usage(fmt.Errorf(...)).
func usagef(format string, a ...any) error { return usage(fmt.Errorf(format, a...)) }

// exitCode is the exit status for err.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailure
}

// flagError is a usage error for what pflag refused: a value, in the
// words of the rest of memcgd's errors, or an unknown flag, with the
// nearest of the command's flags.
func flagError(c *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	var nee *pflag.NotExistError
	switch {
	case errors.As(err, &ive):
		return usagef("--%s: invalid value %q: allowed %s", ive.GetFlag().Name, ive.GetValue(), valueKind(ive.GetFlag().Value.Type()))
	case errors.As(err, &nee) && strings.HasPrefix(err.Error(), "unknown flag: --"):
		var names []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		typed := strings.TrimPrefix(nee.GetSpecifiedName(), "--")
		if near := suggest.Closest(typed, names); near != "" {
			return usagef("%w; did you mean --%s?", err, near)
		}
	}
	return usage(err)
}

// valueKind says what a flag of pflag's type t takes.
func valueKind(t string) string {
	switch t {
	case "int", "int64", "uint", "uint64":
		return "an integer"
	case "duration":
		return "a duration such as 300us, 50ms or 2s"
	case "bool":
		return "true or false"
	}
	return "a " + t
}

// usageArgs makes the argument checks of cmd and its subcommands report
// usage errors.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error { return usage(check(c, args)) }
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// execute runs memcgd with args and returns its exit status. An error is
// printed to stderr on one line, a usage error followed by where the help
// is.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	// The root command runs nothing of its own: an error it returns is
	// cobra's about the command line ("unknown command").
	if cmd == root {
		err = usage(err)
	}
	fmt.Fprintf(stderr, "memcgd: %v\n", err)
	code := exitCode(err)
	if code == exitUsage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}
