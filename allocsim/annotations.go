package allocsim

import (
	"regexp"
	"sort"

	"github.com/vramscope/vramscope/snapshot"
)

// AnnotationEnds are the trace indices right after the end of each
// record_function annotation of device whose name matches re: where
// --empty-cache-after puts its empty_cache() calls. Torch's trace times
// are monotonic within a device, so the first event after an annotation's
// end is found by bisection.
func AnnotationEnds(sn *snapshot.Snapshot, device int, re *regexp.Regexp) []int {
	tr, err := deviceTrace(sn, device)
	if err != nil {
		return nil
	}
	var at []int
	for _, a := range sn.Annotations {
		if a.Device != device || a.Stage != "END" || !re.MatchString(a.Name) {
			continue
		}
		i := sort.Search(tr.Len(), func(i int) bool { return tr.At(i).TimeUS > a.TimeUS })
		if i < tr.Len() {
			at = append(at, i)
		}
	}
	sort.Ints(at)
	return at
}
