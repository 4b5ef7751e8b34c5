# Races a connect to a host socket against the supervisor: the address
# flips between an own socket and the host socket under the call, and the
# descriptor flips between an inet and a Unix socket. Run by
# TestUnixSocketRaces; argv: HOST_SOCKET ITERATIONS.
import ctypes, os, socket, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
host = sys.argv[1].encode()
inside = b"/tmp/in.sock"
srv = socket.socket(socket.AF_UNIX); srv.bind(inside); srv.listen(4096)
def drain():
    while True:
        c, _ = srv.accept(); c.close()
threading.Thread(target=drain, daemon=True).start()
class SockaddrUn(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
addr = SockaddrUn(socket.AF_UNIX, inside)
stop = False
def flip():
    # Swap the address under the call, and the descriptor under the number.
    while not stop:
        addr.path = host
        addr.path = inside
def run(n):
    ok = refused = 0
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX)
        r = libc.connect(s.fileno(), ctypes.byref(addr), ctypes.sizeof(addr))
        if r == 0: ok += 1
        else: refused += 1
        s.close()
    return ok, refused
t = threading.Thread(target=flip); t.start()
print("address race", run(int(sys.argv[2])))
stop = True; t.join()
# Descriptor race: fd N flips between an inet socket and a unix socket
# while connect(N, host path) is in flight.
stop = False
hostaddr = SockaddrUn(socket.AF_UNIX, host)
inet = socket.socket(socket.AF_INET)
target = socket.socket(socket.AF_UNIX).fileno()
def swap():
    while not stop:
        u = socket.socket(socket.AF_UNIX)
        os.dup2(inet.fileno(), target); os.dup2(u.fileno(), target); u.close()
t = threading.Thread(target=swap); t.start()
ok = 0
for _ in range(int(sys.argv[2])):
    if libc.connect(target, ctypes.byref(hostaddr), ctypes.sizeof(hostaddr)) == 0: ok += 1
stop = True; t.join()
print("descriptor race connected", ok)
