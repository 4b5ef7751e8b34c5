package proxy

import (
	"fmt"
	"strings"
)

// envNames are the proxy variables sbx sets in the sandbox, upper and lower
// case, and any the host had is replaced: a host proxy must not be
// inherited.
var envNames = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY", "GRPC_PROXY", "RSYNC_PROXY",
	"npm_config_proxy", "npm_config_https_proxy", "npm_config_noproxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
	"CARGO_HTTP_PROXY", "PIP_PROXY", "NODE_USE_ENV_PROXY",
}

// Env returns env with the proxy variables pointing at the in-sandbox
// bridge: HTTP(S)_PROXY at the HTTP port, ALL_PROXY at SOCKS5 with remote
// name resolution (socks5h), and the tool-specific forms for tools that
// ignore the generic ones (npm, yarn, cargo, pip, Java), and
// NODE_USE_ENV_PROXY for Node's built-in fetch. NO_PROXY keeps the
// sandbox's own loopback direct, whatever the rules: the host's loopback is
// reached as HostLoopback.
func Env(env []string, httpPort, socksPort int) []string {
	return EnvAuth(env, httpPort, socksPort, "")
}

// EnvAuth is Env with the per-run token in the proxy URLs (user "sbx").
func EnvAuth(env []string, httpPort, socksPort int, token string) []string {
	out := make([]string, 0, len(env)+len(envNames)*2)
	javaOpts := ""
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name == "JAVA_TOOL_OPTIONS" {
			javaOpts = value + " "
			continue
		}
		drop := false
		for _, n := range envNames {
			if strings.EqualFold(name, n) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	cred := ""
	if token != "" {
		cred = "sbx:" + token + "@"
	}
	httpURL := fmt.Sprintf("http://%s127.0.0.1:%d", cred, httpPort)
	socksURL := fmt.Sprintf("socks5h://%s127.0.0.1:%d", cred, socksPort)
	noProxy := "localhost,127.0.0.1,::1"
	set := func(name, value string) {
		out = append(out, name+"="+value, strings.ToLower(name)+"="+value)
	}
	set("HTTP_PROXY", httpURL)
	set("HTTPS_PROXY", httpURL)
	set("ALL_PROXY", socksURL)
	set("FTP_PROXY", httpURL)
	set("GRPC_PROXY", httpURL)
	set("NO_PROXY", noProxy)
	out = append(out,
		"RSYNC_PROXY="+fmt.Sprintf("127.0.0.1:%d", httpPort),
		"npm_config_proxy="+httpURL, "npm_config_https_proxy="+httpURL, "npm_config_noproxy="+noProxy,
		"YARN_HTTP_PROXY="+httpURL, "YARN_HTTPS_PROXY="+httpURL,
		"CARGO_HTTP_PROXY="+httpURL, "PIP_PROXY="+httpURL, "NODE_USE_ENV_PROXY=1",
		fmt.Sprintf("JAVA_TOOL_OPTIONS=%[3]s-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=%[1]d -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=%[1]d -Dhttp.nonProxyHosts=%[2]s",
			httpPort, strings.ReplaceAll(noProxy, ",", "|"), javaOpts),
	)
	return out
}

// trustNames are the variables that point tools at the per-run CA.
// Each names a file of roots that replaces (or, for Node, adds to) the
// system's: an inherited value pointing at the system bundle would make the
// tool reject the terminated TLS.
var trustNames = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
	"npm_config_cafile", "NPM_CONFIG_CAFILE", "YARN_CA_FILE_PATH", "AWS_CA_BUNDLE", "HTTPLIB2_CA_CERTS", "NIX_SSL_CERT_FILE",
	"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "DENO_CERT", "CARGO_HTTP_CAINFO",
	"BUNDLE_SSL_CA_CERT", "HEX_CACERTS_PATH"}

// TrustEnv points common tools at a trust bundle (system roots plus the
// per-run CA), and Node at the CA alone (it adds extra certificates to its
// own roots).
func TrustEnv(env []string, caFile, bundleFile string) []string {
	out := make([]string, 0, len(env)+len(trustNames))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range trustNames {
			keep = keep && name != n
		}
		if keep {
			out = append(out, kv)
		}
	}
	for _, n := range trustNames {
		v := bundleFile
		if n == "NODE_EXTRA_CA_CERTS" {
			v = caFile
		}
		out = append(out, n+"="+v)
	}
	return out
}
