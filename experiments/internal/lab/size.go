package lab

import "github.com/memcgd/memcgd/memcg"

// Size is a byte count flag in the kernel's memparse notation ("2G",
// "100M"), as memcgd's own sizes are written.
type Size uint64

// String renders the size in the largest binary unit that divides it.
func (s *Size) String() string { return memcg.FormatSize(uint64(*s)) }

// Set parses v with memcg.ParseSize.
func (s *Size) Set(v string) error {
	n, err := memcg.ParseSize(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// MiB is n bytes in MiB.
func MiB(n uint64) float64 { return float64(n) / (1 << 20) }
