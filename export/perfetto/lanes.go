package perfetto

// lanes packs intervals onto as few threads as possible. Perfetto draws a
// thread's complete events as a stack of properly nested slices and
// rejects partial overlaps, so an interval joins the first lane where it
// either starts after every open interval ended or nests inside the
// innermost one. Intervals must be placed in order of start, longer first
// on ties, so that a parent is placed before its children.
type lanes struct {
	open [][]int64 // per lane, the end times of the open intervals, outermost first
}

// place returns the lane of interval [start, end].
func (l *lanes) place(start, end int64) int {
	for k, ends := range l.open {
		for len(ends) > 0 && ends[len(ends)-1] <= start {
			ends = ends[:len(ends)-1]
		}
		l.open[k] = ends
		if len(ends) == 0 || end <= ends[len(ends)-1] {
			l.open[k] = append(ends, end)
			return k
		}
	}
	l.open = append(l.open, []int64{end})
	return len(l.open) - 1
}
