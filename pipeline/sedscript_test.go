package pipeline

import (
	"slices"
	"testing"
)

func TestReadSed(t *testing.T) {
	for _, tt := range []struct {
		script        string
		runs, unsure  bool
		reads, writes []string
	}{
		{script: "s/a/b/g"},
		{script: "s/a/e/"},
		{script: "s/a/b/e", runs: true},
		{script: "0~1e curl x", runs: true},
		{script: "1,+2e x", runs: true},
		{script: "1,~2e x", runs: true},
		{script: "/a/Ie x", runs: true},
		{script: `\,a,e x`, runs: true},
		{script: "/a/,/b/e x", runs: true},
		{script: "1{e x\n}", runs: true},
		{script: "$!e x", runs: true},
		{script: "w.git/config", writes: []string{".git/config"}},
		{script: "1w .bashrc", writes: []string{".bashrc"}},
		{script: "s/a/b/w.bashrc", writes: []string{".bashrc"}},
		{script: "$!w .bashrc", writes: []string{".bashrc"}},
		{script: "r .env", reads: []string{".env"}},
		{script: "0~1R .env\np", reads: []string{".env"}},
		{script: "y/abc/xyz/;p"},
		{script: "/x/d;s|/|\\||g"},
		{script: "a\\\nhello e world"},
		{script: "s/a", unsure: true},
		{script: "@", unsure: true},
	} {
		in := readSed(tt.script)
		if in.runs != tt.runs || in.unsure != tt.unsure || !slices.Equal(in.reads, tt.reads) || !slices.Equal(in.writes, tt.writes) {
			t.Errorf("%q: %+v, want runs %v unsure %v reads %q writes %q", tt.script, in, tt.runs, tt.unsure, tt.reads, tt.writes)
		}
	}
}

func FuzzReadSed(f *testing.F) {
	for _, s := range []string{"s/a/b/g", "1{e x\n}", `\,a,w f`, "0~2r x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script string) {
		in := readSed(script) // it ends, without a panic
		if in.runs && !containsE(script) {
			t.Fatalf("%q: runs code without an e", script)
		}
	})
}

func containsE(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' {
			return true
		}
	}
	return false
}
