# Opens N connections at once through the sandbox's HTTP proxy, each a
# CONNECT to TARGET, and prints how each was answered; then says "ready"
# and holds them all until stdin closes; then checks every open tunnel
# still echoes a line. Usage: manyconns.py N TARGET
import os
import resource
import socket
import sys

n, target = int(sys.argv[1]), sys.argv[2]
port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1].strip("/"))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < n + 64:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))

socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    socks.append(s)


def head(s):
    """Reads the reply head; returns its status code or what went wrong."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            c = s.recv(1)
            if not c:
                return "closed"
            buf += c
    except OSError as e:
        return type(e).__name__
    return buf.split(b" ", 2)[1].decode()


codes = {}
tunnels = []
for s in socks:
    code = head(s)
    codes[code] = codes.get(code, 0) + 1
    if code == "200":
        tunnels.append(s)
    else:
        s.close()
print("answers", " ".join("%s=%d" % kv for kv in sorted(codes.items())), flush=True)
print("ready", flush=True)
sys.stdin.read()

ok = 0
for i, s in enumerate(tunnels):
    line = b"ping %d\n" % i
    try:
        s.sendall(line)
        got = b""
        while not got.endswith(b"\n"):
            c = s.recv(64)
            if not c:
                break
            got += c
        ok += got == line
    except OSError:
        pass
    s.close()
print("echoed %d of %d" % (ok, len(tunnels)), flush=True)
