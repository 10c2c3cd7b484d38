package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X main.version=v0.1.0".
var version = "devel"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print memcgd's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, rev := version, ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = " " + s.Value
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "memcgd %s%s %s\n", v, rev, bi.GoVersion)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "memcgd %s\n", v)
			return nil
		},
	}
}
