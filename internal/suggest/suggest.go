// Package suggest finds, among the names a field allows, the one a
// mistyped name was most likely meant to be: the "did you mean" of memcgd's
// error messages. The packages that own the names (memcg's knobs, the
// config's and the scenarios' keys, the scenarios' variants) call it.
package suggest

import "fmt"

// Closest returns the name of names nearest to typed by edit distance
// (insertions, deletions, substitutions and swaps of adjacent letters each
// count 1), if it is near enough to be a typo: at most 1 edit for a name of
// up to 4 letters, 2 up to 8, 3 beyond, and fewer edits than typed has
// letters (no name is a typo of "x"). It returns "" when none is, or when
// typed is one of names. Of names equally near, the first wins.
func Closest(typed string, names []string) string {
	best, bestD := "", min(maxEdits(len(typed)), len(typed)-1)+1
	for _, n := range names {
		if n == typed {
			return ""
		}
		if d := distance(typed, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// DidYouMean is `; did you mean "NAME"?` for the Closest name, "" when
// none is close: the tail of an error that lists what is allowed.
func DidYouMean(typed string, names []string) string {
	if c := Closest(typed, names); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

func maxEdits(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// distance is the optimal string alignment distance between a and b, over
// bytes: names here are ASCII.
func distance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j]; three rows suffice.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
