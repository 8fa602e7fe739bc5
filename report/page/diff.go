package page

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"

	"github.com/vramscope/vramscope/diff"
)

// diffScripts are the diff page's scripts: its own view and nothing of the
// report's charts.
var diffScripts = []string{"app/errors.js", "app/diff.js", "app/diffpage.js"}

// WriteDiff writes a comparison as one self-contained page.
func WriteDiff(w io.Writer, title string, rep *diff.Report) error {
	data, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encoding diff payload: %w", err)
	}
	return renderWith(w, title, template.JS(data), diffScripts, []string{"app/app.css", "app/diff.css"})
}
