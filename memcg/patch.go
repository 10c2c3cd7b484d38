package memcg

import (
	"fmt"
	"strings"
)

// Patch is a validated set of knob settings, parsed once where they enter
// (a config rule, a runtime override) and applied to Knobs as often as
// needed without re-parsing and without a way to fail. The zero value sets
// nothing.
type Patch struct {
	set  uint8 // bit i: knobNames[i] is set
	vals Knobs // the set knobs' values
}

// knobBit is the bit of a knob name in Patch.set, 0 for an unknown name.
func knobBit(name string) uint8 {
	for i, n := range knobNames {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// ParsePatch validates name=value pairs as Knobs.Apply does (names, values,
// and never both halves of a ratio/bytes pair) and returns them as a Patch.
func ParsePatch(pairs map[string]string) (Patch, error) {
	k := DefaultKnobs()
	if err := k.Apply(pairs); err != nil {
		return Patch{}, err
	}
	var p Patch
	for name := range pairs {
		p.set |= knobBit(name)
	}
	p.vals = k
	return p, nil
}

// Empty reports whether p sets no knob.
func (p Patch) Empty() bool { return p.set == 0 }

// Has reports whether p sets the knob name.
func (p Patch) Has(name string) bool { return p.set&knobBit(name) != 0 }

// Apply returns k with p's knobs set, with the kernel's side effect that a
// ratio zeroes its bytes twin and the reverse (mm/page-writeback.c,
// dirty_ratio_handler and dirty_bytes_handler).
func (p Patch) Apply(k Knobs) Knobs {
	v := p.vals
	if p.Has(KnobDirtyRatio) {
		k.DirtyRatio, k.DirtyBytes = v.DirtyRatio, 0
	}
	if p.Has(KnobDirtyBytes) {
		k.DirtyBytes, k.DirtyRatio = v.DirtyBytes, 0
	}
	if p.Has(KnobDirtyBackgroundRatio) {
		k.DirtyBackgroundRatio, k.DirtyBackgroundBytes = v.DirtyBackgroundRatio, 0
	}
	if p.Has(KnobDirtyBackgroundBytes) {
		k.DirtyBackgroundBytes, k.DirtyBackgroundRatio = v.DirtyBackgroundBytes, 0
	}
	if p.Has(KnobMinFreeKbytes) {
		k.MinFreeKbytes = v.MinFreeKbytes
	}
	if p.Has(KnobWritebackFirst) {
		k.WritebackFirst = v.WritebackFirst
	}
	return k
}

// Merge returns p with q's knobs set over it; a knob of q drops its
// ratio/bytes twin from p, so the result never holds both halves.
func (p Patch) Merge(q Patch) Patch {
	out := Patch{set: p.set, vals: q.Apply(p.vals)}
	for _, name := range knobNames {
		if q.Has(name) {
			if t := Twin(name); t != "" {
				out.set &^= knobBit(t)
			}
		}
	}
	out.set |= q.set
	return out
}

// Strings returns p's knobs in the text form Knobs.Get prints.
func (p Patch) Strings() map[string]string {
	m := make(map[string]string, 6)
	for _, name := range knobNames {
		if p.Has(name) {
			m[name], _ = p.vals.Get(name) // every name in knobNames is one Get knows
		}
	}
	return m
}

// String prints p as name=value pairs in knob order.
func (p Patch) String() string {
	var b strings.Builder
	for _, name := range knobNames {
		if p.Has(name) {
			v, _ := p.vals.Get(name)
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%s", name, v)
		}
	}
	return b.String()
}

// Twin is the other half of a ratio/bytes pair, "" for an unpaired knob.
func Twin(name string) string {
	switch name {
	case KnobDirtyRatio:
		return KnobDirtyBytes
	case KnobDirtyBytes:
		return KnobDirtyRatio
	case KnobDirtyBackgroundRatio:
		return KnobDirtyBackgroundBytes
	case KnobDirtyBackgroundBytes:
		return KnobDirtyBackgroundRatio
	}
	return ""
}
