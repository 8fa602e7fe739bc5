// Package assets holds the files that the HTML report and the served UI
// are made of, embedded so that the binary needs nothing beside it: the
// vendored uPlot, d3 and d3-flame-graph (vendor/, with their licences)
// and vramscope's own page, style and scripts (app/).
package assets

import "embed"

// FS holds vendor/ and app/.
//
//go:embed vendor/*.js vendor/*.css app
var FS embed.FS
