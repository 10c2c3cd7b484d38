package main

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"time"
)

// DefaultConfigCheck is how often `memcgd run` reads its --config file for
// a change. kubelet takes up to a minute or more to bring a ConfigMap's
// change into a pod's volume (its sync period plus its cache), so 10 s
// adds little to that, for one small read.
const DefaultConfigCheck = 10 * time.Second

// watchConfig reports on changed (without blocking: one pending report is
// enough) each time the content of the file at path differs from the
// content last read, the first time from loaded (what the daemon loaded
// at start). It reads every interval until ctx is done.
//
// Why a periodic read rather than inotify: kubelet updates a ConfigMap
// volume by writing a new timestamped directory and renaming a "..data"
// symlink over the old one (pkg/volume/util/atomic_writer.go), so the
// file's path stays the same while the inode behind it changes: a watch
// on the file never fires, and one on its directory must follow the
// symlink swap, while a file mounted by subPath or bind mount sees no
// event at all. A read of the path follows every symlink to whatever is
// there now, whoever wrote it (kubelet, an editor's rename, configuration
// management), at the cost of one small read per interval; and its timing
// is a ticker's, which testing/synctest can drive.
func watchConfig(ctx context.Context, path string, loaded []byte, interval time.Duration, log *slog.Logger, changed chan<- struct{}) {
	last := sha256.Sum256(loaded)
	var failing string // the read error last logged, "" while reads succeed
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			// Logged once per distinct error: the next read may find
			// the file again, and the content then decides.
			if err.Error() != failing {
				failing = err.Error()
				log.Warn("config watch: cannot read the config file; keeping the running config", "config", path, "err", err)
			}
			continue
		}
		failing = ""
		sum := sha256.Sum256(b)
		if sum == last {
			continue
		}
		last = sum
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}
