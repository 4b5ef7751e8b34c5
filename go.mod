module github.com/sbx-sandbox/sbx

go 1.26.8

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/seccomp/libseccomp-golang v0.11.1
	github.com/spf13/pflag v1.1.0
	golang.org/x/net v0.63.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/elazarl/goproxy v1.9.4
	github.com/google/go-cmp v0.7.0
	golang.org/x/term v0.48.0
	mvdan.cc/sh/v3 v3.14.1
)

require golang.org/x/text v0.44.0 // indirect
