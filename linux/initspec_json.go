//go:build linux

package linux

import "encoding/json"

// The command's argv, environment and directory travel to the init as
// bytes (base64 in the JSON), so a byte that is not UTF-8 reaches the
// command unchanged: JSON strings would turn it into U+FFFD.

// MarshalJSON implements json.Marshaler.
func (s InitSpec) MarshalJSON() ([]byte, error) {
	type plain InitSpec
	return json.Marshal(struct {
		plain
		Argv [][]byte `json:"argv"`
		Env  [][]byte `json:"env"`
		Dir  []byte   `json:"dir"`
	}{plain(s), toBytes(s.Argv), toBytes(s.Env), []byte(s.Dir)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *InitSpec) UnmarshalJSON(b []byte) error {
	type plain InitSpec
	aux := struct {
		*plain
		Argv [][]byte `json:"argv"`
		Env  [][]byte `json:"env"`
		Dir  []byte   `json:"dir"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	s.Argv, s.Env, s.Dir = fromBytes(aux.Argv), fromBytes(aux.Env), string(aux.Dir)
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
