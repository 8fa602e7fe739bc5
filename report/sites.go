package report

import (
	"cmp"
	"slices"
)

// maxSites bounds the callsites of a snapshot's EndSites and of a
// process's Sites: the tail holds little and a chart of more is noise.
const maxSites = 40

// siteTotals adds up samples by site, largest first, at most maxSites.
func siteTotals(samples []sample) []SiteBytes {
	index := map[string]int{}
	out := []SiteBytes{}
	for _, s := range samples {
		k, ok := index[s.site]
		if !ok {
			k = len(out)
			index[s.site] = k
			out = append(out, SiteBytes{Site: s.site})
		}
		out[k].Bytes += s.bytes
	}
	slices.SortFunc(out, byBytes)
	if len(out) > maxSites {
		out = out[:maxSites]
	}
	return out
}

// siteSeries lists each callsite's bytes at the end of every view:
// leaking callsites first, then those with the highest bytes at any end,
// at most maxSites. A callsite outside a view's EndSites counts 0 there.
func siteSeries(views []*built, leaks map[string]bool) []SiteSeries {
	peak := map[string]int64{}
	for _, v := range views {
		for _, s := range v.view.EndSites {
			peak[s.Site] = max(peak[s.Site], s.Bytes)
		}
	}
	out := []SiteSeries{}
	for site := range peak {
		ss := SiteSeries{Site: site, Leak: leaks[site], Bytes: make([]int64, len(views))}
		for k, v := range views {
			for _, s := range v.view.EndSites {
				if s.Site == site {
					ss.Bytes[k] = s.Bytes
				}
			}
		}
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b SiteSeries) int {
		if a.Leak != b.Leak {
			if a.Leak {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(peak[b.Site], peak[a.Site]); c != 0 {
			return c
		}
		return cmp.Compare(a.Site, b.Site)
	})
	if len(out) > maxSites {
		out = out[:maxSites]
	}
	return out
}
