package printable

import "testing"

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"refused to create /w/a.txt", "refused to create /w/a.txt"},
		{"/w/a\nsbx: fake", `/w/a\x0asbx: fake`},
		{"/w/\x1b[2K\rx", `/w/\x1b[2K\x0dx`},
		{"/w/\u202eevil", `/w/\u202eevil`},
		{"/w/été", "/w/été"},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
