package callsite

import (
	"regexp"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// torchNameParts and torchFileParts are the frame filter of
// torch/cuda/_memory_viz.py and MemoryViz.js (research note, section 2):
// unwinder, interpreter and dispatcher frames.
var torchNameParts = []string{
	"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
	"__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
}

var torchFileParts = []string{
	"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
	"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
	"cpython/abstract.h",
}

// libraryFileParts are installed Python code: torch itself (also when run
// from a source checkout), any installed package, and the interpreter's
// frozen modules.
var libraryFileParts = []string{"/torch/", "/site-packages/", "/dist-packages/", "<frozen "}

// stdlibFile matches the standard library (/usr/lib/python3.12/threading.py)
// and inductor's generated code (/tmp/torchinductor_<user>/...), which is
// no line a person wrote.
var stdlibFile = regexp.MustCompile(`/lib/python\d[\d.]*/|torchinductor_|/inductor_cache/`)

// Library reports whether a default rule skips fr: everything but the
// user's own Python code.
func Library(fr snapshot.Frame) bool {
	if native(fr) {
		return true
	}
	// torch matches "_start" as a substring; that would also skip user
	// functions such as restart_step, so only the C entry point itself is.
	if fr.Name == "_start" {
		return true
	}
	for _, p := range torchNameParts {
		if strings.Contains(fr.Name, p) {
			return true
		}
	}
	for _, p := range torchFileParts {
		if strings.Contains(fr.Filename, p) {
			return true
		}
	}
	for _, p := range libraryFileParts {
		if strings.Contains(fr.Filename, p) {
			return true
		}
	}
	return stdlibFile.MatchString(fr.Filename)
}
