package pipeline

import (
	"slices"
	"testing"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

func TestCheckMachServices(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		want string
	}{
		{in: "com.apple.SecurityServer", ok: true},
		{in: "com.apple.trustd*", ok: true},
		{in: "com.apple.distributed_notifications@Uv3", ok: true},
		{in: "*"},
		{in: "com.apple.*"},
		{in: "com.apple.lsd.*"},
		{in: "com.apple.coreservices.launchservicesd"},
		{in: "COM.APPLE.DIAGNOSTICD"},
		{in: `x") (allow default`},
		{in: ""},
		{in: "com.example.agent*", ok: true},
	}
	for _, tt := range tests {
		f := &settings.File{Path: "/p/.sbx/settings.json"}
		got, err := CheckMachServices([]settings.Entry{{Value: tt.in, File: f}})
		if tt.ok != (err == nil) || tt.ok && !slices.Equal(got, []string{tt.in}) {
			t.Errorf("%q: %v %v", tt.in, got, err)
		}
		if err != nil && !(len(err.Error()) > 0 && err.(*MachServiceError).Entry.File == f) {
			t.Errorf("%q: the error does not name the file: %v", tt.in, err)
		}
	}
}
