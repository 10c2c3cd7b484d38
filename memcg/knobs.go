package memcg

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/memcgd/memcgd/internal/suggest"
)

// Knob names, as the seeds spell them (seed 004's memory.dirty_* files,
// seed 001's memory.min_free_kbytes) plus seed 000's switch.
const (
	KnobDirtyRatio           = "dirty_ratio"
	KnobDirtyBytes           = "dirty_bytes"
	KnobDirtyBackgroundRatio = "dirty_background_ratio"
	KnobDirtyBackgroundBytes = "dirty_background_bytes"
	KnobMinFreeKbytes        = "min_free_kbytes"
	KnobWritebackFirst       = "writeback_first"
)

// knobNames lists every knob in the order memcgd prints them: the order
// of knobTable.
var knobNames = func() []string {
	names := make([]string, len(knobTable))
	for i, d := range knobTable {
		names[i] = d.Name
	}
	return names
}()

// KnobNames returns the knob names in the order memcgd prints them.
func KnobNames() []string { return append([]string(nil), knobNames...) }

// KnobDoc describes one knob for the help texts, from the same table that
// Knobs.Set validates against, so that help and validation cannot drift.
type KnobDoc struct {
	Name string
	// Values says what the knob accepts, briefly.
	Values string
	// PatchSet is the unmerged patch set the knob comes from.
	PatchSet string
}

// The patch sets of KnobDoc.PatchSet.
const (
	PatchSetDirtyLimit = "per-cgroup dirty limit"
	PatchSetReclaim    = "per-cgroup background reclaim"
	PatchSetWriteback  = "memcg-first writeback"
)

// knobTable is every knob, in print order.
var knobTable = []KnobDoc{
	{KnobDirtyRatio, "percent of the cgroup's dirtyable memory, 0 to 100", PatchSetDirtyLimit},
	{KnobDirtyBytes, "bytes, with memparse suffixes (16M, 1G)", PatchSetDirtyLimit},
	{KnobDirtyBackgroundRatio, "percent of the cgroup's dirtyable memory, 0 to 100", PatchSetDirtyLimit},
	{KnobDirtyBackgroundBytes, "bytes, with memparse suffixes (16M, 1G)", PatchSetDirtyLimit},
	{KnobMinFreeKbytes, "\"auto\", 0 (background reclaim off) or KiB", PatchSetReclaim},
	{KnobWritebackFirst, "true or false", PatchSetWriteback},
}

// KnobDocs returns every knob's description, in print order.
func KnobDocs() []KnobDoc { return append([]KnobDoc(nil), knobTable...) }

// IsKnob reports whether name is a knob.
func IsKnob(name string) bool { return knobBit(name) != 0 }

// DirtyBytesMin is the smallest non-zero dirty_bytes the kernel accepts
// (mm/page-writeback.c, dirty_bytes_min = 2 * PAGE_SIZE).
const DirtyBytesMin = 2 * PageSize

// MinFreeAuto in Knobs.MinFreeKbytes means "size it from the limit", see
// DefaultMinFreeKbytes.
const MinFreeAuto int64 = -1

// MaxMinFreeKbytes bounds min_free_kbytes as the kernel bounds its own
// (mm/page_alloc.c, init_per_zone_wmark_min clamps to 262144).
const MaxMinFreeKbytes = 262144

// Knobs are one cgroup's own settings. Ratio and bytes of a pair exclude
// each other as vm.dirty_* do: exactly one of them is non-zero, or both are
// zero. The zero value is not useful; start from DefaultKnobs.
type Knobs struct {
	// DirtyRatio is the dirty limit in percent of the cgroup's dirtyable
	// memory; DirtyBytes the same in bytes.
	DirtyRatio uint64
	DirtyBytes uint64
	// DirtyBackgroundRatio and DirtyBackgroundBytes start background
	// write-out of the cgroup's files.
	DirtyBackgroundRatio uint64
	DirtyBackgroundBytes uint64
	// MinFreeKbytes sizes the reclaim watermarks; 0 disables background
	// reclaim, MinFreeAuto sizes it from the limit.
	MinFreeKbytes int64
	// WritebackFirst makes reclaim write out the cgroup's own files before
	// falling back to a full flush (seed 000).
	WritebackFirst bool
}

// DefaultKnobs are the kernel's own defaults for the dirty knobs
// (vm.dirty_ratio 20, vm.dirty_background_ratio 10), an automatic
// min_free_kbytes and writeback_first on.
func DefaultKnobs() Knobs {
	return Knobs{
		DirtyRatio:           20,
		DirtyBackgroundRatio: 10,
		MinFreeKbytes:        MinFreeAuto,
		WritebackFirst:       true,
	}
}

// KnobError is a knob set to a value outside what it allows.
type KnobError struct {
	Knob, Value, Allowed string
}

func (e *KnobError) Error() string {
	return fmt.Sprintf("%s: invalid value %q: allowed %s", e.Knob, e.Value, e.Allowed)
}

// UnknownKnobError is a knob name that is not one of KnobNames, told apart
// from a bad value so that the name, not the value, is what the message
// questions.
type UnknownKnobError struct {
	Knob string
}

func (e *UnknownKnobError) Error() string {
	return fmt.Sprintf("unknown knob %q: allowed %s%s", e.Knob, strings.Join(knobNames, ", "), suggest.DidYouMean(e.Knob, knobNames))
}

// Set sets one knob from its text form, with the kernel's side effects:
// setting a ratio zeroes its bytes twin and the reverse
// (mm/page-writeback.c, dirty_ratio_handler and dirty_bytes_handler).
func (k *Knobs) Set(name, value string) error {
	v := strings.TrimSpace(value)
	bad := func(allowed string) error { return &KnobError{Knob: name, Value: value, Allowed: allowed} }
	switch name {
	case KnobDirtyRatio, KnobDirtyBackgroundRatio:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > 100 {
			return bad("an integer percentage from 0 to 100")
		}
		if name == KnobDirtyRatio {
			k.DirtyRatio, k.DirtyBytes = n, 0
		} else {
			k.DirtyBackgroundRatio, k.DirtyBackgroundBytes = n, 0
		}
	case KnobDirtyBytes, KnobDirtyBackgroundBytes:
		n, err := ParseSize(v)
		min := uint64(1) // dirty_background_bytes: SYSCTL_LONG_ONE
		if name == KnobDirtyBytes {
			min = DirtyBytesMin
		}
		if err != nil || n < min {
			return bad(fmt.Sprintf("a size of at least %d bytes, as memparse reads it (e.g. 16K, 64M, 1G); set the ratio to go back to a ratio", min))
		}
		if name == KnobDirtyBytes {
			k.DirtyBytes, k.DirtyRatio = n, 0
		} else {
			k.DirtyBackgroundBytes, k.DirtyBackgroundRatio = n, 0
		}
	case KnobMinFreeKbytes:
		if v == "auto" {
			k.MinFreeKbytes = MinFreeAuto
			return nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > MaxMinFreeKbytes {
			return bad(fmt.Sprintf("\"auto\", 0 (off) or kilobytes up to %d", MaxMinFreeKbytes))
		}
		k.MinFreeKbytes = int64(n)
	case KnobWritebackFirst:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad("true or false (1 or 0)")
		}
		k.WritebackFirst = b
	default:
		return &UnknownKnobError{Knob: name}
	}
	return nil
}

// Get returns one knob in the text form Set accepts.
func (k Knobs) Get(name string) (string, error) {
	switch name {
	case KnobDirtyRatio:
		return strconv.FormatUint(k.DirtyRatio, 10), nil
	case KnobDirtyBytes:
		return strconv.FormatUint(k.DirtyBytes, 10), nil
	case KnobDirtyBackgroundRatio:
		return strconv.FormatUint(k.DirtyBackgroundRatio, 10), nil
	case KnobDirtyBackgroundBytes:
		return strconv.FormatUint(k.DirtyBackgroundBytes, 10), nil
	case KnobMinFreeKbytes:
		if k.MinFreeKbytes == MinFreeAuto {
			return "auto", nil
		}
		return strconv.FormatInt(k.MinFreeKbytes, 10), nil
	case KnobWritebackFirst:
		return strconv.FormatBool(k.WritebackFirst), nil
	}
	return "", &UnknownKnobError{Knob: name}
}

// Value returns one knob as a typed value for JSON: a ratio as an
// integer percentage, a size as an integer of bytes, min_free_kbytes as
// an integer of KiB or the string "auto", writeback_first as a boolean.
func (k Knobs) Value(name string) (any, error) {
	switch name {
	case KnobDirtyRatio:
		return k.DirtyRatio, nil
	case KnobDirtyBytes:
		return k.DirtyBytes, nil
	case KnobDirtyBackgroundRatio:
		return k.DirtyBackgroundRatio, nil
	case KnobDirtyBackgroundBytes:
		return k.DirtyBackgroundBytes, nil
	case KnobMinFreeKbytes:
		if k.MinFreeKbytes == MinFreeAuto {
			return "auto", nil
		}
		return uint64(k.MinFreeKbytes), nil
	case KnobWritebackFirst:
		return k.WritebackFirst, nil
	}
	return nil, &UnknownKnobError{Knob: name}
}

// KnobValue is Value of a knob given in the text form Get prints or Set
// accepts. A bytes knob's 0, which Get prints when the ratio twin is in
// force and Set refuses, is 0.
func KnobValue(name, text string) (any, error) {
	if (name == KnobDirtyBytes || name == KnobDirtyBackgroundBytes) && strings.TrimSpace(text) == "0" {
		return uint64(0), nil
	}
	k := DefaultKnobs()
	if err := k.Set(name, text); err != nil {
		return nil, err
	}
	return k.Value(name)
}

// Apply sets several knobs given as name=value pairs, all or nothing: on the
// first error k is left as it was.
func (k *Knobs) Apply(pairs map[string]string) error {
	names := make([]string, 0, len(pairs))
	for n := range pairs {
		names = append(names, n)
	}
	sort.Strings(names)
	// A misspelt name is the likelier mistake, and its value means
	// nothing: it is reported before any value.
	for _, n := range names {
		if !IsKnob(n) {
			return &UnknownKnobError{Knob: n}
		}
	}
	for _, pair := range [][2]string{{KnobDirtyRatio, KnobDirtyBytes}, {KnobDirtyBackgroundRatio, KnobDirtyBackgroundBytes}} {
		_, a := pairs[pair[0]]
		_, b := pairs[pair[1]]
		if a && b {
			return &KnobError{Knob: pair[1], Value: pairs[pair[1]],
				Allowed: "only one of " + pair[0] + " and " + pair[1] + " at a time: setting one zeroes the other"}
		}
	}
	next := *k
	for _, n := range names {
		if err := next.Set(n, pairs[n]); err != nil {
			return err
		}
	}
	*k = next
	return nil
}
