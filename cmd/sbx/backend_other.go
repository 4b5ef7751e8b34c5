//go:build !linux && !darwin

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

type otherReport struct {
	OS     string `json:"os"`
	Usable bool   `json:"usable"`
	Detail string `json:"detail"`
}

func (b *backend) doctor(context.Context) any {
	return &otherReport{OS: runtime.GOOS, Detail: darwin.ErrNotDarwin.Error()}
}

func (b *backend) usable(any) bool { return false }

func (b *backend) clean() (any, error) { return nil, darwin.ErrNotDarwin }
