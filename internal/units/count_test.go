package units

import "testing"

func TestPlural(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, "0 segments"},
		{1, "1 segment"},
		{2, "2 segments"},
		{-1, "-1 segments"},
	}
	for _, test := range tests {
		if got := Plural(test.n, "segment"); got != test.want {
			t.Errorf("Plural(%d) = %q, want %q", test.n, got, test.want)
		}
	}
}
