package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manSection is the section of memcgd's man pages: user commands.
const manSection = "1"

// newGendocsCmd is the hidden command that go generate runs to write the
// man pages into docs/man (main.go); TestManPagesAreUpToDate checks them.
func newGendocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "__gendocs DIR",
		Short:  "Write memcgd's man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pages, err := manPages()
			if err != nil {
				return err
			}
			old, _ := filepath.Glob(filepath.Join(args[0], "memcgd*."+manSection))
			for _, f := range old {
				if err := os.Remove(f); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			for name, page := range pages {
				if err := os.WriteFile(filepath.Join(args[0], name), page, 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// manPages renders a man page for every command memcgd shows, by file
// name (memcgd-sim-sweep.1). The pages carry no date, so that they are
// the same bytes whenever they are generated.
func manPages() (map[string][]byte, error) {
	root := newRootCmd(io.Discard, io.Discard)
	// The root's help ends with the exit status; the pages have it in a
	// section of their own.
	root.Long = strings.TrimSuffix(strings.TrimSpace(root.Long), exitStatusHelp)
	pages := map[string][]byte{}
	var err error
	walkAvailable(root, func(c *cobra.Command) {
		if err != nil {
			return
		}
		c.DisableAutoGenTag = true
		c.Long = manMarkdown(c.Long)
		var buf bytes.Buffer
		date := time.Time{}
		header := &doc.GenManHeader{Section: manSection, Date: &date, Source: "memcgd", Manual: "memcgd manual"}
		if err = doc.GenMan(c, header, &buf); err != nil {
			err = fmt.Errorf("man page of %s: %w", c.CommandPath(), err)
			return
		}
		page := bytes.Replace(buf.Bytes(), []byte(` "Jan 0001" `), []byte(` "" `), 1)
		page = withExitStatus(page)
		pages[strings.ReplaceAll(c.CommandPath(), " ", "-")+"."+manSection] = page
	})
	return pages, err
}

// walkAvailable calls fn for cmd and every command below it that help
// shows (not hidden, not cobra's help command).
func walkAvailable(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() && c.Name() != "help" {
			walkAvailable(c, fn)
		}
	}
}

// manMarkdown makes a help text's indented blocks (tables, lists of
// knobs) read as preformatted text by the Markdown that cobra's man pages
// are rendered from: indented four spaces, after a blank line.
func manMarkdown(long string) string {
	lines := strings.Split(long, "\n")
	var out []string
	prevIndented := false
	for _, l := range lines {
		indented := strings.HasPrefix(l, "  ")
		if indented {
			if !prevIndented && len(out) > 0 && out[len(out)-1] != "" {
				out = append(out, "")
			}
			l = "  " + l
		} else if prevIndented && l != "" {
			out = append(out, "")
		}
		out = append(out, l)
		prevIndented = indented
	}
	return strings.Join(out, "\n")
}

// withExitStatus adds an EXIT STATUS section to a man page, before SEE
// ALSO.
func withExitStatus(page []byte) []byte {
	section := ".SH EXIT STATUS\n.PP\n" + strings.Join(strings.Fields(strings.TrimPrefix(exitStatusHelp, "Exit status: ")), " ") + "\n\n"
	if i := bytes.Index(page, []byte(".SH SEE ALSO")); i >= 0 {
		return append(append(append([]byte(nil), page[:i]...), section...), page[i:]...)
	}
	return append(page, "\n"+section...)
}
