# A Unix listener with a full backlog keeps its blocking connects waiting;
# another connect meanwhile must not wait on them (TestUnixSocketRaces).
import socket, threading, time
full = socket.socket(socket.AF_UNIX); full.bind("/tmp/full.sock"); full.listen(0)
other = socket.socket(socket.AF_UNIX); other.bind("/tmp/other.sock"); other.listen(8)
clients = []
def dial(p):
    c = socket.socket(socket.AF_UNIX); c.connect(p); clients.append(c)
ts = [threading.Thread(target=dial, args=("/tmp/full.sock",)) for _ in range(4)]
for t in ts: t.start()
time.sleep(0.3)
t0 = time.time(); dial("/tmp/other.sock"); print("other connected while full blocks: %.3fs" % (time.time() - t0))
print("pending on full:", sum(t.is_alive() for t in ts))
for _ in range(4):
    full.accept()
for t in ts: t.join(5)
print("all done:", not any(t.is_alive() for t in ts), len(clients))
