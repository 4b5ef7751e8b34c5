//go:build darwin

package main

import (
	"context"
	"runtime"

	"github.com/sbx-sandbox/sbx/darwin"
)

func closeLeakedFDs() {}

// backend is what sbx doctor needs of the platform.
type backend struct{}

func newBackend(string, string) *backend { return &backend{} }

type darwinReport struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Usable bool   `json:"usable"`
	Detail string `json:"detail"`
}

func (b *backend) doctor(context.Context) any {
	ok, detail := darwin.DoctorCheck()
	return &darwinReport{OS: runtime.GOOS, Arch: runtime.GOARCH, Usable: ok, Detail: detail}
}

func (b *backend) usable(rep any) bool { return rep.(*darwinReport).Usable }

func (b *backend) clean() (any, error) {
	return map[string]string{"clean": "nothing to clean on macOS"}, nil
}
