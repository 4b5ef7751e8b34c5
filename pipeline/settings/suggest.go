package settings

import "strings"

// Suggest returns the known name closest to name (case-insensitively, at
// most two edits away), or "" when none is that close: for "did you mean"
// in errors.
func Suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b (bytes).
func distance(a, b string) int {
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
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is " (did you mean X?)" or "".
func didYouMean(name string, known []string) string {
	if s := Suggest(name, known); s != "" && s != name {
		return " (did you mean " + s + "?)"
	}
	return ""
}
