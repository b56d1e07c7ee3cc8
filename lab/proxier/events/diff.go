package events

import "slices"

// DiffRules compares two rule listings (one rule or element per line) as
// multisets and returns the lines only in after (added) and only in before
// (removed), each sorted. At most limit lines of each are returned
// (limit <= 0: no limit); truncated reports whether any were cut.
func DiffRules(before, after []string, limit int) (added, removed []string, truncated bool) {
	count := make(map[string]int, len(before))
	for _, l := range before {
		count[l]++
	}
	for _, l := range after {
		if count[l] > 0 {
			count[l]--
			continue
		}
		added = append(added, l)
	}
	for _, l := range before {
		if count[l] > 0 {
			count[l]--
			removed = append(removed, l)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	if limit > 0 {
		if len(added) > limit {
			added, truncated = added[:limit], true
		}
		if len(removed) > limit {
			removed, truncated = removed[:limit], true
		}
	}
	return added, removed, truncated
}
