package settings

// keyStatus says what sbx does with a known key.
type keyStatus uint8

const (
	// supported keys are read and enforced.
	supported keyStatus = iota
	// accepted keys belong to Claude Code features outside the sandbox
	// (permissions, hooks, UI); they are parsed for their type only.
	accepted
	// ignoredStricter keys are not implemented, and ignoring them leaves the
	// sandbox at least as strict as honouring them would: a warning names them.
	ignoredStricter
	// unsupportedLooser keys are not implemented, and ignoring a non-default
	// value would loosen the sandbox or drop a protection the user asked for:
	// such a file is refused.
	unsupportedLooser
)

// keySpec describes one known settings key.
type keySpec struct {
	kind   Kind // expected kind; Array means an array of strings
	status keyStatus
	// loosens reports whether this value widens what the sandbox allows;
	// such values are dropped from untrusted project files.
	loosens func(n *Node) bool
	// managedOnly keys only have an effect in managed settings.
	managedOnly bool
	// note is added to warnings and errors about the key.
	note string
}

func always(*Node) bool         { return true }
func ifTrue(n *Node) bool       { return n.Kind == KindBool && n.Bool }
func ifFalse(n *Node) bool      { return n.Kind == KindBool && !n.Bool }
func ifNonEmpty(n *Node) bool   { return len(n.Elems) > 0 }
func ifNotDefault(n *Node) bool { return n.Kind != KindNull }

// objects are the keys whose value is an object of further known keys.
// An unknown key inside one of them is an error: a misspelt denyWrite must
// never be ignored.
var objects = map[string]bool{
	"sandbox":            true,
	"sandbox.filesystem": true,
	"sandbox.network":    true,
	"sandbox.limits":     true,
	"sbx":                true,
	"sbx.hooks":          true,
}

// schema lists every key sbx knows inside the objects above.
var schema = map[string]keySpec{
	"sandbox.enabled":                  {kind: KindBool, loosens: ifFalse},
	"sandbox.failIfUnavailable":        {kind: KindBool, loosens: ifFalse},
	"sandbox.allowUnsandboxedCommands": {kind: KindBool, loosens: ifTrue},
	"sandbox.autoAllowBashIfSandboxed": {kind: KindBool, status: accepted, loosens: ifTrue, note: "used by the permission gate"},
	"sandbox.excludedCommands":         {kind: KindArray, status: accepted, loosens: ifNonEmpty, note: "used by the permission gate"},
	"sandbox.enableWeakerNestedSandbox": {kind: KindBool, status: ignoredStricter, loosens: ifTrue,
		note: "sbx always mounts a fresh /proc"},
	"sandbox.enableWeakerNetworkIsolation": {kind: KindBool, loosens: ifTrue, note: "macOS only"},
	"sandbox.allowAppleEvents":             {kind: KindBool, status: ignoredStricter, loosens: ifTrue, note: "macOS only"},
	"sandbox.allowMachLookup":              {kind: KindArray, loosens: ifNonEmpty, note: "macOS only"},
	"sandbox.bwrapPath":                    {kind: KindString, loosens: always},
	"sandbox.socatPath":                    {kind: KindString, status: ignoredStricter, loosens: always, note: "sbx needs no socat"},
	"sandbox.ripgrep":                      {kind: KindObject, status: ignoredStricter, loosens: always, note: "sbx needs no ripgrep"},
	"sandbox.ignoreViolations":             {kind: KindObject, status: ignoredStricter, loosens: always},
	"sandbox.credentials":                  {kind: KindObject, status: accepted, loosens: ifNotDefault, note: "read by the credentials layer"},

	// sbx's resource limits: counts are numbers, sizes ("512MiB", "2G")
	// and durations ("90s") are strings. Any value from an untrusted
	// project file is dropped (it could raise a limit).
	"sandbox.limits.maxProcs":     {kind: KindNumber, loosens: always},
	"sandbox.limits.maxMemory":    {kind: KindString, loosens: always},
	"sandbox.limits.maxCpu":       {kind: KindString, loosens: always},
	"sandbox.limits.timeout":      {kind: KindString, loosens: always},
	"sandbox.limits.maxOutput":    {kind: KindString, loosens: always},
	"sandbox.limits.maxTmp":       {kind: KindString, loosens: always},
	"sandbox.limits.maxOpenFiles": {kind: KindNumber, loosens: always},
	"sandbox.limits.maxDisk":      {kind: KindString, loosens: always},

	"sandbox.filesystem.allowWrite":                {kind: KindArray, loosens: ifNonEmpty},
	"sandbox.filesystem.denyWrite":                 {kind: KindArray},
	"sandbox.filesystem.denyRead":                  {kind: KindArray},
	"sandbox.filesystem.allowRead":                 {kind: KindArray, loosens: ifNonEmpty},
	"sandbox.filesystem.allowManagedReadPathsOnly": {kind: KindBool, managedOnly: true},
	"sandbox.filesystem.disabled": {kind: KindBool, status: ignoredStricter, loosens: ifTrue,
		note: "sbx always enforces the filesystem policy"},

	"sandbox.network.allowedDomains":          {kind: KindArray, loosens: ifNonEmpty},
	"sandbox.network.deniedDomains":           {kind: KindArray},
	"sandbox.network.strictAllowlist":         {kind: KindBool, loosens: ifFalse},
	"sandbox.network.allowManagedDomainsOnly": {kind: KindBool, managedOnly: true},
	"sandbox.network.allowUnixSockets":        {kind: KindArray, loosens: ifNonEmpty},
	"sandbox.network.allowAllUnixSockets":     {kind: KindBool, loosens: ifTrue},
	"sandbox.network.allowLocalBinding":       {kind: KindBool, loosens: ifTrue, note: "macOS only"},
	"sandbox.network.allowMachLookup":         {kind: KindArray, loosens: ifNonEmpty, note: "macOS only"},
	"sandbox.network.httpProxyPort":           {kind: KindNumber, status: ignoredStricter, loosens: always, note: "external proxies are not supported"},
	"sandbox.network.socksProxyPort":          {kind: KindNumber, status: ignoredStricter, loosens: always, note: "external proxies are not supported"},
	"sandbox.network.tlsTerminate":            {kind: KindObject, status: ignoredStricter, loosens: always},
	"sandbox.network.mitmProxy":               {kind: KindObject, status: ignoredStricter, loosens: always},

	"sbx.trustedProjects":  {kind: KindArray, loosens: ifNonEmpty, note: "read from user and managed settings only"},
	"sbx.hooks.failClosed": {kind: KindBool, loosens: ifFalse, note: "used by the permission gate"},
}

// topLevel lists Claude Code's top-level settings keys, accepted without a
// warning. Those outside the sandbox are parsed for their JSON kind only.
var topLevel = map[string]Kind{
	"$schema": KindString, "permissions": KindObject, "hooks": KindObject, "env": KindObject, "model": KindString,
	"apiKeyHelper": KindString, "awsAuthRefresh": KindString, "awsCredentialExport": KindString,
	"cleanupPeriodDays": KindNumber, "includeCoAuthoredBy": KindBool, "includeGitInstructions": KindBool,
	"disableAllHooks": KindBool, "allowManagedHooksOnly": KindBool, "allowManagedPermissionRulesOnly": KindBool,
	"allowManagedMcpServersOnly": KindBool, "enableAllProjectMcpServers": KindBool, "enabledMcpjsonServers": KindArray,
	"disabledMcpjsonServers": KindArray, "statusLine": KindObject, "outputStyle": KindString, "forceLoginMethod": KindString,
	"forceLoginOrgUUID": KindString, "otelHeadersHelper": KindString, "spinnerTipsEnabled": KindBool,
	"alwaysThinkingEnabled": KindBool, "companyAnnouncements": KindArray, "enabledPlugins": KindObject,
	"extraKnownMarketplaces": KindObject, "theme": KindString, "language": KindString, "availableModels": KindArray,
	"fallbackModel": KindString, "effortLevel": KindString, "attribution": KindObject, "feedbackSurveyRate": KindNumber,
	"sandbox": KindObject, "sbx": KindObject, "autoMode": KindObject, "disableAutoMode": KindString,
	"disableBypassPermissionsMode": KindString, "skipDangerousModePermissionPrompt": KindBool,
}
