//go:build linux

package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// findCargo returns the cargo command and the rustup home it needs: on
// PATH, or where rustup installs it (~/.cargo/bin). Missing fails in CI.
func findCargo(t *testing.T) (cargo, rustupHome string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		cargo = filepath.Join(home, ".cargo", "bin", "cargo")
		if _, err := os.Stat(cargo); err != nil {
			if inCI() {
				t.Fatal("cargo not installed")
			}
			t.Skip("cargo not installed")
		}
	}
	rustupHome = os.Getenv("RUSTUP_HOME")
	if rustupHome == "" {
		rustupHome = filepath.Join(home, ".rustup")
	}
	return cargo, rustupHome
}

// crateFile is a .crate: the package's folder, gzipped tar.
func crateFile(t *testing.T, name, version string, files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for path, body := range files {
		hdr := &tar.Header{Name: name + "-" + version + "/" + path, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// cargoRegistryDouble serves one crate, sbxdep 0.1.0, over cargo's sparse
// index protocol, with its download at base+"/dl". It counts downloads.
func cargoRegistryDouble(t *testing.T, base func() string, downloads *atomic.Int32) http.Handler {
	crate := crateFile(t, "sbxdep", "0.1.0", map[string]string{
		"Cargo.toml": "[package]\nname = \"sbxdep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"src/lib.rs": "pub fn hello() -> &'static str { \"from the cargo registry double\" }\n",
	})
	sum := sha256.Sum256(crate)
	line := fmt.Sprintf(`{"name":"sbxdep","vers":"0.1.0","deps":[],"cksum":"%s","features":{},"yanked":false}`+"\n", hex.EncodeToString(sum[:]))
	mux := http.NewServeMux()
	mux.HandleFunc("/index/config.json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"dl":"%s/dl"}`, base())
	})
	mux.HandleFunc("/index/sb/xd/sbxdep", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(line)) })
	mux.HandleFunc("/dl/sbxdep/0.1.0/download", func(w http.ResponseWriter, r *http.Request) {
		downloads.Add(1)
		w.Write(crate)
	})
	return mux
}

// cargo builds a crate with a registry dependency with no flag but the
// registry's domain: the download lands in the sandbox's own CARGO_HOME
// for the project (~/.cargo stays untouched), the user's cargo
// configuration still applies (linked in), and credentials.toml is not
// there. A second build uses the cache: no second download.
func TestCargoRegistryZeroConfig(t *testing.T) {
	cargo, rustupHome := findCargo(t)
	e := newEnv(t)
	var base string
	var downloads atomic.Int32
	host := hostDouble(t, cargoRegistryDouble(t, func() string { return base }, &downloads))
	base = "http://" + host
	// The user's cargo configuration names the registry (source
	// replacement) and holds a token beside it in credentials.toml.
	os.MkdirAll(filepath.Join(e.home, ".cargo"), 0o755)
	os.WriteFile(filepath.Join(e.home, ".cargo", "config.toml"), []byte("[source.crates-io]\nreplace-with = \"double\"\n\n[source.double]\nregistry = \"sparse+"+base+"/index/\"\n"), 0o644)
	os.WriteFile(filepath.Join(e.home, ".cargo", "credentials.toml"), []byte("[registry]\ntoken = \"cio-secret\"\n"), 0o600)
	e.write("Cargo.toml", "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nsbxdep = \"0.1\"\n")
	e.write("src/main.rs", "fn main() { println!(\"{}\", sbxdep::hello()); }\n")
	script := "export RUSTUP_HOME=" + rustupHome + " PATH=" + filepath.Dir(cargo) + ":$PATH; cargo build -q 2>&1 && ./target/debug/app; ls \"$CARGO_HOME\""
	r := e.sh(script, "--allow-domain", host, "--max-disk", "none")
	if r.code != 0 || !strings.Contains(r.stdout, "from the cargo registry double") {
		t.Fatalf("cargo build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "credentials") {
		t.Errorf("the sandbox's CARGO_HOME holds the credentials:\n%s", r.stdout)
	}
	cache, _ := filepath.Glob(filepath.Join(e.home, ".cache", "sbx", "projects", "ws-*", "cargo"))
	if len(cache) != 1 {
		t.Fatalf("the sandbox's CARGO_HOME for this workspace: %v", cache)
	}
	if crates, _ := filepath.Glob(filepath.Join(cache[0], "registry", "cache", "*", "sbxdep-0.1.0.crate")); len(crates) != 1 {
		t.Errorf("the download is not in the sandbox's cargo cache: %v", crates)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.home, ".cargo")); len(ents) != 2 {
		t.Errorf("~/.cargo changed: %v", ents)
	}
	if lock := readFile(t, filepath.Join(e.ws, "Cargo.lock")); !strings.Contains(lock, "name = \"sbxdep\"") {
		t.Errorf("Cargo.lock on the host:\n%s", lock)
	}
	e.sh("rm -rf target", "--max-disk", "none")
	r = e.sh(script, "--allow-domain", host, "--max-disk", "none")
	if r.code != 0 || downloads.Load() != 1 {
		t.Errorf("second build: exit %d, %d downloads (want 1: the cache kept)\n%s", r.code, downloads.Load(), r.stdout)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A CARGO_HOME the environment sets elsewhere (Rust's images use
// /usr/local/cargo) keeps its credentials.toml from the sandbox, as
// ~/.cargo's is.
func TestCustomCargoHomeCredentialsHidden(t *testing.T) {
	e := newEnv(t)
	cargoHome := filepath.Join(filepath.Dir(e.home), "cargohome")
	os.Mkdir(cargoHome, 0o755)
	os.WriteFile(filepath.Join(cargoHome, "credentials.toml"), []byte("token = \"cio_CUSTOMHOME_SECRET\"\n"), 0o600)
	os.WriteFile(filepath.Join(cargoHome, "config.toml"), []byte("[net]\nretry = 1\n"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, "run", "-c", `cat "$CARGO_HOME/credentials.toml"; cat "$CARGO_HOME/config.toml"`)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "CARGO_HOME="+cargoHome)
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "CUSTOMHOME_SECRET") || !strings.Contains(string(out), "retry = 1") {
		t.Errorf("the sandbox read:\n%s", out)
	}
}
