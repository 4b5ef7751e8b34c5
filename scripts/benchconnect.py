# Connect-heavy workload for scripts/bench-connect: N loopback TCP connects
# (blocking sockets, then sockets with a timeout, which Python makes
# non-blocking) and N Unix-socket connects, each to a listener of its own
# in the same process. Prints microseconds per connect.
import os, socket, sys, threading, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000


def serve(srv):
    def loop():
        while True:
            c, _ = srv.accept()
            c.close()
    threading.Thread(target=loop, daemon=True).start()


def measure(name, family, addr, timeout):
    t = time.perf_counter()
    for _ in range(N):
        c = socket.socket(family)
        if timeout:
            c.settimeout(timeout)
        c.connect(addr)
        c.close()
    print("%s %.1f" % (name, (time.perf_counter() - t) / N * 1e6))


tcp = socket.socket()
tcp.bind(("127.0.0.1", 0))
tcp.listen(1024)
serve(tcp)
measure("tcp-blocking", socket.AF_INET, tcp.getsockname(), None)
measure("tcp-nonblocking", socket.AF_INET, tcp.getsockname(), 5)
unix_path = "/tmp/sbx-bench-connect.sock"
try:
    uds = socket.socket(socket.AF_UNIX)
except OSError as e:
    # An sbx build without the supervisor refuses Unix sockets.
    print("unix refused(errno-%d)" % e.errno)
    sys.exit(0)
try:
    os.unlink(unix_path)
except OSError:
    pass
uds.bind(unix_path)
uds.listen(1024)
serve(uds)
measure("unix", socket.AF_UNIX, unix_path, None)
