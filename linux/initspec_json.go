//go:build linux

package linux

import "encoding/json"

// The command's argv, environment and directory travel to the init (and
// from it to the limits stub) as bytes (base64 in the JSON), so a byte that
// is not UTF-8 reaches the command unchanged: JSON strings would turn it
// into U+FFFD.

type callBytes struct {
	Path []byte   `json:"path,omitempty"`
	Argv [][]byte `json:"argv"`
	Env  [][]byte `json:"env"`
	Dir  []byte   `json:"dir"`
}

// MarshalJSON implements json.Marshaler.
func (c InitCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		callBytes
		Trace bool `json:"trace,omitempty"`
	}{callBytes{Argv: toBytes(c.Argv), Env: toBytes(c.Env), Dir: []byte(c.Dir)}, c.Trace})
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *InitCall) UnmarshalJSON(b []byte) error {
	var aux struct {
		callBytes
		Trace bool `json:"trace,omitempty"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*c = InitCall{Argv: fromBytes(aux.Argv), Env: fromBytes(aux.Env), Dir: string(aux.Dir), Trace: aux.Trace}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (c stubCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(callBytes{Path: []byte(c.Path), Argv: toBytes(c.Argv), Env: toBytes(c.Env), Dir: []byte(c.Dir)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *stubCall) UnmarshalJSON(b []byte) error {
	var aux callBytes
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*c = stubCall{Path: string(aux.Path), Argv: fromBytes(aux.Argv), Env: fromBytes(aux.Env), Dir: string(aux.Dir)}
	return nil
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func fromBytes(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
