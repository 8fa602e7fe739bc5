package page

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"

	"github.com/vramscope/vramscope/diff"
)

// diffScripts and diffStyles make the diff page: its own view and nothing
// of the report's charts.
var (
	diffScripts = []string{"app/errors.js", "app/util.js", "app/model.js", "app/diff.js", "app/diffpage.js"}
	diffStyles  = []string{"app/app.css", "app/diff.css"}
)

// WriteDiff writes a comparison as one self-contained page.
func WriteDiff(w io.Writer, title string, rep *diff.Report) error {
	data, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encoding diff payload: %w", err)
	}
	return renderWith(w, title, template.JS(data), diffScripts, diffStyles)
}
