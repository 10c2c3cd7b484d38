package watch

// RefusePSI makes w's PSI trigger writes fail with refuse(dir) for the
// cgroups at the directories where it returns an error.
func RefusePSI(w *Watcher, refuse func(dir string) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	write := w.writeTrigger
	w.writeTrigger = func(dir string, fd int, b []byte) (int, error) {
		if err := refuse(dir); err != nil {
			return 0, err
		}
		return write(dir, fd, b)
	}
}
