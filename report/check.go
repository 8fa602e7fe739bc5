package report

import (
	"errors"
	"fmt"

	"github.com/vramscope/vramscope/internal/units"
)

// Check verifies the references the page follows from one part of the
// payload to another: a block's callsite index, a site's bytes per
// snapshot, the timeline's columns, a marker's event, the focus. The
// Builder makes them consistent; Check is how vramscope report notices
// when it did not, instead of writing a page that cannot draw and
// printing success.
func (p *Payload) Check() error {
	var errs []error
	ids := map[int]bool{}
	for _, pr := range p.Processes {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("process %s: %s", pr.ID, fmt.Sprintf(format, args...)))
		}
		for _, s := range pr.Sites {
			if len(s.Bytes) != len(pr.Totals) {
				bad("callsite %s has bytes at %d snapshots, the process has %d", s.Site, len(s.Bytes), len(pr.Totals))
			}
		}
		focused := pr.Focus == nil
		for _, sv := range pr.Snapshots {
			if ids[sv.ID] {
				bad("snapshot id %d used twice", sv.ID)
			}
			ids[sv.ID] = true
			for _, dv := range sv.Devices {
				for _, err := range dv.check() {
					bad("%s cuda:%d: %v", sv.Input, dv.Device, err)
				}
				if f := pr.Focus; f != nil && f.Snapshot == sv.ID && f.Device == dv.Device {
					focused = true
				}
			}
		}
		if !focused {
			bad("focus on snapshot %d cuda:%d, which it does not have", pr.Focus.Snapshot, pr.Focus.Device)
		}
	}
	return errors.Join(errs...)
}

// check lists the inconsistencies of one device's view.
func (dv DeviceView) check() []error {
	var errs []error
	s := dv.Series
	n := len(s.X)
	for _, col := range []struct {
		name string
		n    int
	}{
		{"first", len(s.First)}, {"allocated_min", len(s.AllocatedMin)}, {"allocated_max", len(s.AllocatedMax)},
		{"reserved_min", len(s.ReservedMin)}, {"reserved_max", len(s.ReservedMax)},
	} {
		if col.n != n {
			errs = append(errs, fmt.Errorf("timeline column %s has %d buckets, x has %d", col.name, col.n, n))
		}
	}
	errs = append(errs, dv.WhatIf.check(n, dv.Events)...)
	for _, m := range dv.Markers {
		if m.Event < 0 || m.Event >= dv.Events {
			errs = append(errs, fmt.Errorf("%s marker at event %d of %d", m.Kind, m.Event, dv.Events))
		}
	}
	for _, st := range dv.States {
		for _, seg := range st.Segments {
			for _, b := range seg.Blocks {
				if b.Site < -1 || b.Site >= len(st.Sites) || (b.State != "free") != (b.Site >= 0) {
					errs = append(errs, fmt.Errorf("state %s: %s block at %#x+%#x names callsite %d of %d",
						st.Label, b.State, seg.Address, b.Offset, b.Site, len(st.Sites)))
				}
				if b.Offset+b.Size > seg.Size {
					errs = append(errs, fmt.Errorf("state %s: block at %#x+%#x runs past its %s segment",
						st.Label, seg.Address, b.Offset, units.Bytes(seg.Size)))
				}
			}
		}
	}
	return errs
}
