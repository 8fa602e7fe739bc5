package units

import "strconv"

// Plural formats a count of a regular noun: "1 segment", "2 segments",
// "0 segments". Reports count many things (blocks, files, steps, holes),
// and this one helper keeps "1 segments" out of all of them.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
