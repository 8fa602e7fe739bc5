// Package page renders the report's HTML page: one file with every
// script, style and, for the static report, the payload inlined, so that
// it opens offline and can be mailed or attached to an issue.
package page

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"

	"github.com/vramscope/vramscope/assets"
	"github.com/vramscope/vramscope/report"
)

// scripts and styles are inlined in this order: errors.js first, so that
// it records errors of the others; the libraries and the data model
// before the code using them.
var (
	scripts = []string{
		"app/errors.js", "app/util.js",
		"vendor/uPlot.iife.min.js", "vendor/d3.min.js", "vendor/d3-flamegraph.umd.min.js",
		"app/model.js", "app/allocstate.js", "app/whatif.js", "app/pools.js", "app/breakdown.js", "app/diff.js", "app/app.js",
	}
	styles = []string{"vendor/uPlot.min.css", "app/app.css", "app/diff.css"}
)

// view is page.html's data. The assets are ours, embedded in the binary,
// hence trusted as JS and CSS.
type view struct {
	Title   string
	Payload template.JS
	Scripts []template.JS
	Styles  []template.CSS
}

var tmpl = template.Must(template.ParseFS(assets.FS, "app/page.html"))

// Write writes the static report of p.
func Write(w io.Writer, title string, p *report.Payload) error {
	// json.Marshal escapes <, > and &, so the payload cannot close the
	// script element it sits in.
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding report payload: %w", err)
	}
	return render(w, title, template.JS(data))
}

// WriteServed writes the page of the served UI, which fetches the payload
// from the server.
func WriteServed(w io.Writer, title string) error {
	return render(w, title, template.JS("null"))
}

func render(w io.Writer, title string, payload template.JS) error {
	return renderWith(w, title, payload, scripts, styles)
}

// renderWith writes page.html with the payload and the named assets.
func renderWith(w io.Writer, title string, payload template.JS, scripts, styles []string) error {
	v := view{Title: title, Payload: payload}
	for _, name := range scripts {
		b, err := fs.ReadFile(assets.FS, name)
		if err != nil {
			return fmt.Errorf("reading asset: %w", err)
		}
		v.Scripts = append(v.Scripts, template.JS(b))
	}
	for _, name := range styles {
		b, err := fs.ReadFile(assets.FS, name)
		if err != nil {
			return fmt.Errorf("reading asset: %w", err)
		}
		v.Styles = append(v.Styles, template.CSS(b))
	}
	if err := tmpl.Execute(w, v); err != nil {
		return fmt.Errorf("writing report page: %w", err)
	}
	return nil
}
