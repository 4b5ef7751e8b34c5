package session

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/internal/regular"
	"github.com/sbx-sandbox/sbx/pipeline"
)

// masks are the credential files a session's sandboxes show masked: the
// hidden credential files of known formats, secrets replaced by
// placeholders bound to the hosts the file names. A long-lived session
// reads them again for each call (a token renewed on the host reaches the
// next call as a new placeholder the proxy binds); a file whose content is
// unchanged keeps its mask and placeholders, so a warm sandbox launched
// after the call before stays usable. The redactor covers every secret
// the session has seen, a replaced token's too.
type masks struct {
	home string
	warn func(string)
	env  []*creds.Secret // the environment's, fixed for the session

	mu     sync.Mutex
	byPath map[string]maskEntry // by format and path
	seen   []*creds.Secret      // every file secret of the session
	red    *creds.Redactor
}

// maskEntry is one file's mask and the content it was made from.
type maskEntry struct {
	data    string
	file    pipeline.MaskedFile
	secrets []*creds.Secret
}

func newMasks(home string, env []*creds.Secret, warn func(string)) *masks {
	return &masks{home: home, warn: warn, env: env, byPath: map[string]maskEntry{}, red: creds.NewRedactor(env)}
}

// now reads the credential files pol hides and returns their masks and
// the secrets behind every placeholder a sandbox may hold: the
// environment's, then every file secret of the session, a replaced
// token's too (the proxy keeps binding it to its host and turns it back
// into its placeholder in what a host that stored it sends back). A file
// re-opened with allowRead is seen as it is; one that cannot be read as
// its format stays hidden, with a warning, as does a file two credential
// paths lead to (~/.npmrc a link to ~/.netrc: read as one format, the
// other's secrets would stay in clear).
func (m *masks) now(pol *fsrules.Policy) ([]pipeline.MaskedFile, []*creds.Secret) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rels := map[string][]string{}
	var paths []string
	for _, rel := range creds.MaskableFiles {
		path, err := filepath.EvalSymlinks(filepath.Join(m.home, rel))
		if err != nil || !hiddenFile(pol, path) {
			continue
		}
		if rels[path] == nil {
			paths = append(paths, path)
		}
		rels[path] = append(rels[path], rel)
	}
	var files []pipeline.MaskedFile
	grew := false
	for _, path := range paths {
		if r := rels[path]; len(r) > 1 {
			m.warn(path + " stays hidden from the sandbox: ~/" + strings.Join(r, " and ~/") + " lead to it, credential files of different formats")
			continue
		}
		rel := rels[path][0]
		e, fresh, err := m.entry(rel, path)
		if err != nil {
			m.warn("~/" + rel + " stays hidden from the sandbox: " + err.Error())
			continue
		}
		if fresh {
			m.seen = append(m.seen, e.secrets...)
			grew = grew || len(e.secrets) > 0
		}
		files = append(files, e.file)
	}
	if grew {
		m.red = creds.NewRedactor(slices.Concat(m.env, m.seen))
	}
	return files, slices.Concat(m.env, m.seen)
}

// entry is the mask of the credential file at path, read as the format
// of rel, made again only when its content changed (fresh).
func (m *masks) entry(rel, path string) (maskEntry, bool, error) {
	data, err := regular.Read(path, 1<<20)
	if err != nil {
		return maskEntry{}, false, err
	}
	key := rel + "\x00" + path
	if e, ok := m.byPath[key]; ok && e.data == string(data) {
		return e, false, nil
	}
	f, err := creds.MaskFile(rel, path, data)
	if err != nil {
		return maskEntry{}, false, err
	}
	e := maskEntry{data: string(data), file: pipeline.MaskedFile{Path: path, Content: f.Content}, secrets: f.Secrets}
	m.byPath[key] = e
	return e, true, nil
}

// redactor redacts every secret the session has seen so far.
func (m *masks) redactor() *creds.Redactor {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.red
}

// hiddenFile reports whether path is a denyRead file of the policy.
func hiddenFile(pol *fsrules.Policy, path string) bool {
	for _, d := range pol.DenyRead {
		if d.Path == path && !d.Dir {
			return true
		}
	}
	return false
}
