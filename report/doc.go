// Package report turns an analysis and the replayed snapshots behind it
// into one presentation-neutral Payload: the data every graphical front end
// draws (the single-file HTML report, the served UI). It holds rows and
// numbers only, never markup, so that the HTML file, the HTTP API and the
// text and JSON outputs of analyze agree by construction.
//
// The pipeline is
//
//  1. the caller decodes each snapshot, replays it and hands it to a
//     Builder (AddSnapshot), which reduces it at once to a SnapshotView:
//     per device the allocated and reserved series downsampled to min/max
//     buckets, markers (steps, snapshot() calls, OOMs), the allocator state
//     at the peak, at the end and at each OOM, flame graphs of the live
//     bytes at the end and at the peak, the live bytes per callsite at
//     the end, and the reserved bytes the allocator model predicts under
//     the setting it finds best (WhatIf). The snapshot can then be dropped;
//  2. Finish joins the views with analyze's Report by input path: each
//     process gets its verdict, findings and notes, its snapshots' views,
//     the bytes per callsite across its snapshots and, for leaks, the flame
//     graph of the blocks the leaking callsites still hold; a device keeps
//     its WhatIf only where its findings advise that setting;
//  3. StateAt, FlameAt and Diff compute the same items on demand for an
//     event or a pair of snapshots (the served UI's clicks).
//
// Slices in the payload are never nil, so that JavaScript can iterate
// without checks.
package report
