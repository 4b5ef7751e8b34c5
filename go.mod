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
	github.com/modelcontextprotocol/go-sdk v1.8.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/term v0.48.0
	golang.org/x/text v0.44.0
	mvdan.cc/sh/v3 v3.14.1
)

require (
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
