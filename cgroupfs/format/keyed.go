package format

// parseKeyed parses a flat keyed file, one "key value" pair a line with a
// decimal value (memory.stat, memory.events; Documentation/admin-guide/
// cgroup-v2.rst, "Format"). field returns where a key's value goes, or
// nil for a key the caller does not want: those lines are not checked
// beyond their shape, since a future kernel may print anything there.
func parseKeyed(file string, b []byte, field func(key []byte) *uint64) error {
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		key, value, ok := keyValue(line)
		if !ok {
			return lineError(file, n, line, `"key value"`)
		}
		p := field(key)
		if p == nil {
			continue
		}
		v, err := parseUint(value)
		if err != nil {
			return lineError(file, n, line, `"key value" with a decimal value`)
		}
		*p = v
	}
	return nil
}
