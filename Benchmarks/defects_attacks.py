#!/usr/bin/env python3
"""Issue 15's repros, one per call, measured against one running gateway (the companion of Benchmarks/defects.sh).

usage:
  defects_attacks.py backend PORT STATS_PORT
      The counting backend: HTTP/1.1 keep-alive on PORT; reads every request body (Content-Length or chunked)
      before it answers `ok` (so a stalled body holds its upstream connection, as a real API would); /big is
      10,000,000 bytes; records the last 500 request heads. STATS_PORT answers GET /stats (accepts, open
      connections, requests), GET /heads and GET /clear (its own connections are not counted).
  defects_attacks.py run DEFECT --port P --admin A --pid PID --stats S --tmp DIR --bin GATEWAY [--quick]
      Runs DEFECT's repro against the gateway on P (pid PID, admin port A) and prints one markdown row:
      | defect | repro | RSS before | RSS peak | RSS after | CLOSE-WAIT | open | upstream connects | CPU s | observed | verdict |
      DEFECT is one of 1h2 1h1 2 3 4 5 6 7a 7b 8 9 (7a uses a limited-use token and saves it; 7b, after the
      gateway was restarted, replays it and prints the row). --quick shrinks counts and durations (development).

Every loop is bounded in count and time; every socket is closed before the call returns.
"""
import asyncio
import base64
import collections
import json
import os
import random
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak_attacks import PREFACE, connect, frame, hpack_get, hpack_post, rst_close  # noqa: E402

HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
BIG = 10_000_000


# ---------------------------------------------------------------------------------------------------------------
# The counting backend
# ---------------------------------------------------------------------------------------------------------------

class BackendState:
    accepts = 0
    open = 0
    requests = 0
    heads = collections.deque(maxlen=500)


async def _read_chunked(reader):
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return total
        left = size
        while left > 0:
            chunk = await reader.read(min(left, 65536))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(chunk)
        total += size
        await reader.readexactly(2)


async def _backend_conn(reader, writer):
    st = BackendState
    st.accepts += 1
    st.open += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            st.requests += 1
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ")
            path = parts[1] if len(parts) > 1 else b""
            st.heads.append({"path": path.decode("latin-1"), "head": head[:4096].decode("latin-1")})
            headers = {}
            for line in lines[1:]:
                if b":" in line:
                    k, v = line.split(b":", 1)
                    headers[k.strip().lower()] = v.strip()
            if path.startswith(b"/early"):  # answers before the body, then reads it (nginx's `return 200`)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")
                await writer.drain()
            if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                await _read_chunked(reader)
            elif b"content-length" in headers:
                left = int(headers[b"content-length"])
                while left > 0:
                    chunk = await reader.read(min(left, 65536))
                    if not chunk:
                        raise asyncio.IncompleteReadError(b"", left)
                    left -= len(chunk)
            if path.startswith(b"/early"):
                pass
            elif path == b"/big":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % BIG)
                block = b"b" * 65536
                sent = 0
                while sent < BIG:
                    n = min(len(block), BIG - sent)
                    writer.write(block[:n])
                    sent += n
                    await writer.drain()
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")
                await writer.drain()
            if headers.get(b"connection", b"").lower() == b"close":
                break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError, OSError):
        pass
    finally:
        st.open -= 1
        try:
            writer.close()
        except Exception:
            pass


async def _stats_conn(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ")[1]
        st = BackendState
        if path == b"/heads":
            body = json.dumps(list(st.heads.copy()))
        elif path == b"/clear":
            st.heads.clear()
            body = "{}"
        else:
            body = json.dumps({"accepts": st.accepts, "open": st.open, "requests": st.requests})
        data = body.encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(data) + data)
        await writer.drain()
    except Exception:
        pass
    finally:
        writer.close()


async def _serve(handler, port, backlog, **kw):
    server = await asyncio.start_server(handler, HOST, port, backlog=backlog, **kw)
    async with server:
        await server.serve_forever()


def _backend_main(port, stats_port):
    # The stats port has a loop (and thread) of its own: a flood of upstream connects must not starve it.
    threading.Thread(target=lambda: asyncio.run(_serve(_stats_conn, stats_port, 64)), daemon=True).start()
    asyncio.run(_serve(_backend_conn, port, 4096, limit=256 * 1024))


# ---------------------------------------------------------------------------------------------------------------
# Measuring the gateway
# ---------------------------------------------------------------------------------------------------------------

def rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        rest = stat[stat.rfind(")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / CLK_TCK
    except OSError:
        return float("nan")


def close_wait(pid):
    """The gateway's TCP sockets (client and upstream sides) in CLOSE-WAIT: its fds' inodes in /proc/net/tcp*."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return -1
    n = 0
    for table in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == "08" and fields[9] in inodes:
                        n += 1
        except OSError:
            pass
    return n


def metrics(admin, timeout=3):
    try:
        with urllib.request.urlopen("http://%s:%d/metrics" % (HOST, admin), timeout=timeout) as r:
            return r.read().decode()
    except Exception:
        return None


def metric(text, name):
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def open_connections(admin):
    text = metrics(admin)
    if text is None:
        return "n/a"  # the admin port did not answer
    v = metric(text, 'gateway_connections{state="open"}')
    return "-" if v is None else "%d" % v


def backend(stats, what="stats"):
    for attempt in range(4):
        try:
            with urllib.request.urlopen("http://%s:%d/%s" % (HOST, stats, what), timeout=10) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            if attempt == 3:
                raise
            time.sleep(1)


class Measure:
    """RSS sampled every 100 ms from start() to finish(); CPU over the repro; the backend's accepts."""

    def __init__(self, args):
        self.a = args
        self.pid = args.pid
        self.peak = 0.0
        self._stop = threading.Event()

    def start(self):
        # The backend first settles from the previous repro: nothing open, no accept in the last 0.5 s (≤ 15 s).
        end = time.time() + 15
        last = backend(self.a.stats)
        while time.time() < end:
            time.sleep(0.5)
            st = backend(self.a.stats)
            if st["open"] == 0 and st["accepts"] == last["accepts"]:
                break
            last = st
        self.rss_before = rss_mib(self.pid)
        self.peak = self.rss_before
        self.accepts0 = backend(self.a.stats)["accepts"]
        self.cpu0 = cpu_seconds(self.pid)
        self.t0 = time.time()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.wait(0.1):
            r = rss_mib(self.pid)
            if r == r and r > self.peak:
                self.peak = r

    def end_repro(self):
        self.cpu = cpu_seconds(self.pid) - self.cpu0
        self.repro_seconds = time.time() - self.t0

    def finish(self, settle):
        time.sleep(settle)
        self._stop.set()
        self._thread.join()
        r = rss_mib(self.pid)
        self.peak = max(self.peak, r) if r == r else self.peak
        self.rss_after = r
        self.close_wait = close_wait(self.pid)
        self.open = open_connections(self.a.admin)
        st = backend(self.a.stats)
        self.upstream_connects = st["accepts"] - self.accepts0
        self.backend_open = st["open"]


def row(defect, repro, m, observed, verdict):
    if m is None:
        cells = ["-"] * 7
    else:
        cells = ["%.1f" % m.rss_before, "%.1f" % m.peak, "%.1f" % m.rss_after, str(m.close_wait), m.open,
                 str(m.upstream_connects), "%.2f" % m.cpu]
    print("| %s | %s | %s | %s | %s |" % (defect, repro, " | ".join(cells), observed, verdict), flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Small clients
# ---------------------------------------------------------------------------------------------------------------

def http_get(port, path="/", timeout=5.0, headers=b""):
    """One HTTP/1.1 request on a fresh connection: (status or 'timeout'/'error', seconds)."""
    t = time.time()
    try:
        s = connect(port, timeout=timeout)
        s.settimeout(timeout)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: a\r\n%sConnection: close\r\n\r\n" % (path.encode(), headers))
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        if data.startswith(b"HTTP/1.1 "):
            return int(data[9:12]), time.time() - t
        return "closed", time.time() - t
    except socket.timeout:
        return "timeout", time.time() - t
    except OSError:
        return "error", time.time() - t


_HUFF_DIGITS = {(0b00000, 5): "0", (0b00001, 5): "1", (0b00010, 5): "2", (0b011001, 6): "3", (0b011010, 6): "4",
                (0b011011, 6): "5", (0b011100, 6): "6", (0b011101, 6): "7", (0b011110, 6): "8", (0b011111, 6): "9"}
_STATIC_STATUS = {8: "200", 9: "204", 10: "206", 11: "304", 12: "400", 13: "404", 14: "500"}


def _huffman_digits(data):
    bits = "".join("{:08b}".format(b) for b in data)
    out, i = "", 0
    while i + 5 <= len(bits) and len(out) < 3:
        for width in (5, 6):
            code = int(bits[i:i + width], 2) if i + width <= len(bits) else None
            if (code, width) in _HUFF_DIGITS:
                out += _HUFF_DIGITS[(code, width)]
                i += width
                break
        else:
            return "?"
    return out or "?"


def h2_status(block):
    """:status from the first field of a response header block (static index, or a literal, Huffman digits)."""
    try:
        i = 0
        while block[i] & 0xE0 == 0x20:  # dynamic table size update
            i += 1 if block[i] & 0x1F != 0x1F else 2
        b0 = block[i]
        if b0 & 0x80:
            return _STATIC_STATUS.get(b0 & 0x7F, "?")
        idx = b0 & 0x3F if b0 & 0xC0 == 0x40 else b0 & 0x0F
        if idx != 8 and not (8 <= idx <= 14):
            return "?"
        h = block[i + 1]
        value = block[i + 2:i + 2 + (h & 0x7F)]
        return _huffman_digits(value) if h & 0x80 else value.decode()
    except (IndexError, UnicodeDecodeError):
        return "?"


class H2Reader:
    """Parses frames off a socket; answers SETTINGS and PING so the peer has nothing to wait for."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.eof = False

    def feed(self):
        """Reads what is there; returns the complete frames [(type, flags, stream, payload)]."""
        try:
            data = self.s.recv(65536)
        except BlockingIOError:
            return []
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return []
        self.buf += data
        frames = []
        while len(self.buf) >= 9:
            n = (self.buf[0] << 16) | (self.buf[1] << 8) | self.buf[2]
            if len(self.buf) < 9 + n:
                break
            ftype, flags = self.buf[3], self.buf[4]
            sid = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
            payload = self.buf[9:9 + n]
            self.buf = self.buf[9 + n:]
            frames.append((ftype, flags, sid, payload))
            try:
                if ftype == 4 and not flags & 1:
                    self.s.sendall(frame(4, 1))
                elif ftype == 6 and not flags & 1:
                    self.s.sendall(frame(6, 1, 0, payload))
            except OSError:
                pass
        return frames


def headers_block(flags, payload):
    if flags & 0x8:  # PADDED
        pad = payload[0]
        payload = payload[1:len(payload) - pad]
    if flags & 0x20:  # PRIORITY
        payload = payload[5:]
    return payload


def literal(name, value):
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def summarize(values):
    c = collections.Counter(values)
    return ", ".join("%s×%d" % (k, v) for k, v in c.most_common()) or "none"


# ---------------------------------------------------------------------------------------------------------------
# The repros
# ---------------------------------------------------------------------------------------------------------------

def defect1(args, proto):
    """40 concurrent clients: POST to an upstream route, 2 × 16 KiB of body, then close (1 in 4 with RST)."""
    seconds = 3 if args.quick else 25
    clients = 5 if args.quick else 40
    chunk = b"x" * 16384
    payloads = []
    for path in ("/upload", "/early"):  # an upstream that waits for the body, one that answers before it
        if proto == "h2":
            payloads.append(PREFACE + frame(4) + frame(1, 0x4, 1, hpack_post(path)) + frame(0, 0, 1, chunk) * 2)
        else:
            payloads.append(b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n" % path.encode()
                            + chunk * 2)
    counts = collections.Counter()
    lock = threading.Lock()

    def worker(seed, deadline):
        rnd = random.Random(seed)
        while time.time() < deadline:
            try:
                s = connect(args.port)
            except OSError:
                with lock:
                    counts["connect failed"] += 1
                time.sleep(0.05)
                continue
            try:
                s.sendall(payloads[seed % 2])
            except OSError:
                with lock:
                    counts["send failed"] += 1
            time.sleep(rnd.uniform(0, 0.1))  # before or after the request reached the upstream
            if rnd.random() < 0.25:
                rst_close(s)
            else:
                s.close()
            with lock:
                counts["clients"] += 1

    m = Measure(args)
    m.start()
    deadline = time.time() + seconds
    threads = [threading.Thread(target=worker, args=(i, deadline)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 10)
    m.end_repro()
    m.finish(settle=10)
    probe, latency = http_get(args.port, "/", timeout=3)
    name = "h2c" if proto == "h2" else "HTTP/1.1"
    repro = ("%d concurrent %s clients for %d s: POST (%s), 2×16 KiB DATA, random 0–100 ms, close (¼ RST); half to "
             "an upstream path that waits for the body, half to one that answers first; "
             "max_connections 100, 2 threads; settle 10 s" % (clients, name, seconds,
                                                                "no END_STREAM" if proto == "h2" else "CL 1000000"))
    observed = ("%d clients closed mid-body (%d connect failures); after settle: backend still holds %d upstream "
                "conns; new client GET / → %s" % (counts["clients"], counts["connect failed"], m.backend_open, probe))
    ok = m.close_wait == 0 and m.open in ("0", "-") and m.backend_open == 0 and probe == 200
    row("1 (%s)" % name, repro, m, observed, "PASS" if ok else "LEAK")


def defect2(args):
    """HTTP/1.1 Content-Length 1000000 + 10 bytes and an h2c stream with 10 bytes of DATA, then silence."""
    n = 5 if args.quick else 20
    watch = 70
    sel = selectors.DefaultSelector()
    h1, h2 = [], []
    m = Measure(args)
    m.start()
    t0 = time.time()
    for _ in range(n):
        s = connect(args.port)
        s.sendall(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n0123456789")
        s.setblocking(False)
        st = {"kind": "h1", "s": s, "status": None, "answered": None, "closed": None, "buf": b""}
        sel.register(s, selectors.EVENT_READ, st)
        h1.append(st)
    for _ in range(n):
        s = connect(args.port)
        s.sendall(PREFACE + frame(4) + frame(1, 0x4, 1, hpack_post("/upload")) + frame(0, 0, 1, b"0123456789"))
        s.setblocking(False)
        st = {"kind": "h2", "s": s, "r": H2Reader(s), "status": None, "answered": None, "closed": None, "rst": None}
        sel.register(s, selectors.EVENT_READ, st)
        h2.append(st)
    time.sleep(2)
    held_early = held = backend(args.stats)["open"]
    upstream_zero_at = None
    max_held = held_early
    next_poll = time.time()
    while time.time() - t0 < watch:
        for key, _ in sel.select(timeout=0.2):
            st = key.data
            now = time.time() - t0
            if st["kind"] == "h1":
                try:
                    data = st["s"].recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    st["buf"] += data
                    if st["status"] is None and b"\r\n" in st["buf"]:
                        st["status"] = st["buf"][9:12].decode("latin-1")
                        st["answered"] = now
                else:
                    st["closed"] = now
                    sel.unregister(st["s"])
            else:
                for ftype, flags, sid, payload in st["r"].feed():
                    if sid == 1 and ftype == 1 and st["status"] is None:
                        st["status"] = h2_status(headers_block(flags, payload))
                        st["answered"] = now
                    elif sid == 1 and ftype == 3 and st["rst"] is None:
                        st["rst"] = now
                        if st["answered"] is None:
                            st["answered"] = now
                            st["status"] = "RST"
                    elif ftype == 7 and st["answered"] is None:
                        st["answered"] = now
                        st["status"] = "GOAWAY"
                if st["r"].eof:
                    st["closed"] = now
                    if st["answered"] is None:
                        st["answered"], st["status"] = now, "closed"
                    sel.unregister(st["s"])
        if time.time() >= next_poll:
            next_poll = time.time() + 1
            held = backend(args.stats)["open"]
            max_held = max(max_held, held)
            if held == 0 and upstream_zero_at is None and time.time() - t0 > 3:
                upstream_zero_at = time.time() - t0
            elif held > 0:
                upstream_zero_at = None
        done = all(st["answered"] is not None for st in h2) and all(st["closed"] is not None for st in h1)
        if done and upstream_zero_at is not None:
            break
    m.end_repro()
    elapsed = time.time() - t0
    for st in h1 + h2:
        try:
            sel.unregister(st["s"])
        except (KeyError, ValueError):
            pass
        st["s"].close()
    m.finish(settle=2)

    def times(values):
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        return "%.1f–%.1f s" % (min(values), max(values))

    observed = ("HTTP/1.1: answers %s (at %s), closed by the gateway %d/%d (at %s); h2c: answers %s (at %s); "
                "upstream conns held: "
                "%d at 2 s, max %d, %s" % (
                    summarize([st["status"] for st in h1 if st["status"]]), times([st["answered"] for st in h1]),
                    sum(st["closed"] is not None for st in h1), n, times([st["closed"] for st in h1]),
                    summarize([st["status"] for st in h2 if st["status"]]), times([st["answered"] for st in h2]),
                    held_early, max_held,
                    ("0 from %.1f s" % upstream_zero_at) if upstream_zero_at is not None
                    else "%d still held at %.0f s" % (held, elapsed)))
    ok = (all(st["status"] == "408" and st["closed"] is not None and st["closed"] <= 65 for st in h1)
          and all(st["status"] == "408" and st["answered"] <= 65 for st in h2)
          and upstream_zero_at is not None and upstream_zero_at <= 66)
    repro = ("%d HTTP/1.1 POSTs (Content-Length 1000000, 10 bytes) + %d h2c POST streams (10 bytes of DATA), then "
             "silence; watched up to %d s; default timeouts (idle_timeout 30s), 1 thread" % (n, n, watch))
    row("2", repro, m, observed, "PASS" if ok else "FAIL")


def defect3(args):
    """400 HEADERS+RST_STREAM pairs per connection, reconnecting, from 4 clients; a normal client probes."""
    seconds = 3 if args.quick else 30
    attackers = 1 if args.quick else 4
    pairs = 400
    out = bytearray(PREFACE + frame(4))
    for i in range(pairs):
        sid = 2 * i + 1
        out += frame(1, 0x5, sid, hpack_get("/"))
        out += frame(3, 0, sid, b"\x00\x00\x00\x08")
    payload = bytes(out)
    counts = collections.Counter()
    lock = threading.Lock()
    probes = []

    def attacker(deadline):
        while time.time() < deadline:
            started = time.time()
            try:
                s = connect(args.port)
            except OSError:
                with lock:
                    counts["connect failed"] += 1
                time.sleep(0.05)
                continue
            goaway = False
            try:
                s.sendall(payload)
                s.setblocking(False)
                r = H2Reader(s)
                end = time.time() + 0.1
                while time.time() < end and not r.eof:
                    sel = selectors.DefaultSelector()
                    sel.register(s, selectors.EVENT_READ)
                    if sel.select(timeout=max(0, end - time.time())):
                        if any(f[0] == 7 for f in r.feed()):
                            goaway = True
                    sel.close()
            except OSError:
                pass
            rst_close(s)  # no TIME_WAIT left behind on the client side
            time.sleep(max(0, 0.02 - (time.time() - started)))  # at most 50 connections/s per client
            with lock:
                counts["connections"] += 1
                counts["streams"] += pairs
                counts["goaway"] += goaway

    def prober(deadline):
        while time.time() < deadline:
            probes.append(http_get(args.port, "/", timeout=5))
            time.sleep(0.25)

    m = Measure(args)
    m.start()
    deadline = time.time() + seconds
    threads = [threading.Thread(target=attacker, args=(deadline,)) for _ in range(attackers)]
    threads.append(threading.Thread(target=prober, args=(deadline,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 15)
    m.end_repro()
    m.finish(settle=5)
    ok_probes = sum(1 for s, _ in probes if s == 200)
    worst = max((t for _, t in probes), default=0)
    observed = ("%d HEADERS+RST_STREAM pairs sent over %d connections (GOAWAY seen on %d); normal client: %d/%d × 200 (%s), "
                "max latency %.0f ms" % (counts["streams"], counts["connections"], counts["goaway"], ok_probes,
                                         len(probes), summarize([s for s, _ in probes]), worst * 1000))
    bounded = m.upstream_connects <= max(10, 0.01 * counts["streams"])
    ok = bounded and ok_probes == len(probes)
    repro = ("%d h2c clients × %d s (each ≤ 50 connections/s): %d HEADERS+RST_STREAM pairs per connection, read "
             "0.1 s, reconnect; a normal client GETs / every 0.25 s on a fresh HTTP/1.1 connection; 2 threads" % (
                 attackers, seconds, pairs))
    row("3", repro, m, observed, "PASS" if ok else ("AMPLIFIED" if not bounded else "DEGRADED"))


def defect4(args):
    """SETTINGS_INITIAL_WINDOW_SIZE=0, 100 streams of /big (10 MB) on each of 20 connections, held, dropped."""
    conns = 4 if args.quick else 20
    streams = 100
    hold = 5 if args.quick else 20
    after = 5 if args.quick else 30
    socks = []
    m = Measure(args)
    m.start()
    for _ in range(conns):
        try:
            s = connect(args.port)
            out = PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 0))
            for i in range(streams):
                out += frame(1, 0x5, 2 * i + 1, hpack_get("/big"))
            s.sendall(out)
            s.setblocking(False)
            socks.append(H2Reader(s))
        except OSError:
            pass
    sel = selectors.DefaultSelector()
    for r in socks:
        sel.register(r.s, selectors.EVENT_READ, r)
    end = time.time() + hold
    buffered = None
    buffered_bytes = None
    mid = time.time() + hold * 0.75
    while time.time() < end:
        for key, _ in sel.select(timeout=0.2):
            key.data.feed()
            if key.data.eof:
                sel.unregister(key.data.s)
        if buffered is None and time.time() >= mid:
            buffered_bytes = metric(metrics(args.admin), "gateway_h2_buffered_response_bytes")
            buffered = "-" if buffered_bytes is None else "%.1f MiB" % (buffered_bytes / 1048576)
    peak_hold = m.peak
    for r in socks:
        rst_close(r.s)
    sel.close()
    m.end_repro()
    m.finish(settle=after)
    n = len(socks) * streams
    growth = peak_hold - m.rss_before
    per_stream = growth * 1024 / max(n, 1)
    per_conn = growth / max(len(socks), 1)
    retained = m.rss_after - m.rss_before
    # The per-connection cap (1 MiB in the fix): the gateway's own buffered-bytes gauge where it exists, else RSS.
    held_per_conn = (buffered_bytes / 1048576 if buffered_bytes is not None else growth) / max(len(socks), 1)
    observed = ("%d zero-window streams on %d connections: +%.0f MiB at peak (%.0f KiB/stream, %.1f MiB/connection); "
                "gateway_h2_buffered_response_bytes during hold: %s%s; %d s after the clients left: RSS %.1f MiB, "
                "%.0f MiB (%.0f%% of the growth) not returned" % (
                    n, len(socks), growth, per_stream, per_conn, buffered,
                    "" if buffered_bytes is None else " (%.1f MiB/connection)" % held_per_conn,
                    after, m.rss_after, retained, 100 * retained / max(growth, 0.1)))
    failed = []
    if per_stream >= 200:
        failed.append("per-stream")
    if held_per_conn > 1.5:
        failed.append("per-connection cap")
    if retained > max(16, 0.25 * growth):
        failed.append("not returned")
    verdict = "PASS" if not failed else "FAIL (%s)" % ", ".join(failed)
    repro = ("%d h2c connections × %d streams GET /big (10 MB), SETTINGS_INITIAL_WINDOW_SIZE=0, held %d s, then RST; "
             "RSS after = %d s later; 2 threads" % (conns, streams, hold, after))
    row("4", repro, m, observed, verdict)


def defect5(args):
    """Gateway under prlimit --nofile=256: 300 connections held; CPU over 5 s; then release and probe."""
    n = 300
    window = 5
    held = []
    failed = 0
    m = Measure(args)
    m.start()
    for _ in range(n):
        try:
            held.append(connect(args.port, timeout=1))
        except OSError:
            failed += 1
    time.sleep(1)
    cpu0 = cpu_seconds(args.pid)
    time.sleep(window)
    cpu_window = cpu_seconds(args.pid) - cpu0
    probe_held, t_held = http_get(args.port, "/", timeout=2)
    for s in held:
        s.close()
    m.end_repro()
    time.sleep(0.5)
    probe_after, t_after = http_get(args.port, "/", timeout=3)
    m.finish(settle=2)
    observed = ("CPU %.2f s over %d s with %d connections held (%.0f%% of a core); new client while held: %s "
                "(%.1f s); after release: %s in %.2f s" % (cpu_window, window, len(held), 100 * cpu_window / window,
                                                        probe_held, t_held, probe_after, t_after))
    ok = cpu_window <= 0.5 and probe_after == 200
    repro = ("gateway under prlimit --nofile=256:256 (2 threads); %d connections opened and held %d s (CPU s "
             "column: whole repro), then released" % (n, window + 1))
    row("5", repro, m, observed, "PASS" if ok else "FAIL")


def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(args, *extra):
    out = subprocess.run([args.bin, "mint", "--key", os.path.join(args.tmp, "key.pem"), "--project-number",
                          "123456789012", "--app-id", "1:123456789012:ios:abc123", *extra],
                         check=True, capture_output=True, text=True, timeout=30)
    return out.stdout.strip().splitlines()[0]


def defect6(args):
    """A validly signed token whose sub holds CRLF + a second request: does the upstream see it?"""
    header, payload, _ = mint(args, "--ttl", "1h").split(".")
    claims = json.loads(_unb64url(payload))
    claims["sub"] = ("1:123456789012:ios:abc123\r\n\r\nGET /o/SMUG-injected-by-sub HTTP/1.1\r\nHost: a\r\n"
                     "X-AppCheck-Status: verified")
    body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = header.encode() + b"." + body
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", os.path.join(args.tmp, "key.pem")],
                         input=signing_input, check=True, capture_output=True, timeout=30).stdout
    token = signing_input + b"." + _b64url(sig)
    backend(args.stats, "clear")
    m = Measure(args)
    m.start()
    status, _ = http_get(args.port, "/api/orders", timeout=5, headers=b"X-Firebase-AppCheck: " + token + b"\r\n")
    time.sleep(1)
    m.end_repro()
    m.finish(settle=1)
    heads = backend(args.stats, "heads")
    smuggled = [h["path"] for h in heads if "SMUG" in h["path"]]
    observed = ("client got %s; upstream received %d request(s): %s" % (
        status, len(heads), ", ".join(h["path"] for h in heads) or "none"))
    repro = "GET /api/orders (enforce) with a signed token whose sub is `<app id>\\r\\n\\r\\nGET /o/SMUG-injected-by-sub …`"
    row("6", repro, m, observed, "SPLIT" if smuggled else "PASS")


def defect7(args, phase):
    """A limited-use token used once, the gateway restarted (memory store), the token used again."""
    path = os.path.join(args.tmp, "defect7.json")
    if phase == "a":
        time.sleep(2.5)  # issued after the store came up (clock_skew 1s)
        token = mint(args, "--limited-use")
        first, _ = http_get(args.port, "/replay", timeout=5, headers=b"X-Firebase-AppCheck: %s\r\n" % token.encode())
        second, _ = http_get(args.port, "/replay", timeout=5, headers=b"X-Firebase-AppCheck: %s\r\n" % token.encode())
        with open(path, "w") as f:
            json.dump({"token": token, "first": first, "second": second}, f)
        return
    with open(path) as f:
        saved = json.load(f)
    again, _ = http_get(args.port, "/replay", timeout=5,
                        headers=b"X-Firebase-AppCheck: %s\r\n" % saved["token"].encode())
    observed = ("first use %s, second use %s, after the restart %s" % (saved["first"], saved["second"], again))
    repro = ("limited-use token on a replay route (memory store, clock_skew 1s): used twice, gateway restarted, "
             "used again")
    row("7", repro, None, observed, "PASS" if again != 200 else "REPLAYED")


def defect8(args):
    """X_AppCheck_Status and X_Forwarded_For over HTTP/1.1 and h2c: what the upstream receives."""
    backend(args.stats, "clear")
    m = Measure(args)
    m.start()
    h1_status, _ = http_get(args.port, "/defect8-h1", timeout=5,
                            headers=b"X_AppCheck_Status: verified\r\nX_Forwarded_For: 6.6.6.6\r\n")
    h2_status_seen = "none"
    try:
        s = connect(args.port, timeout=5)
        block = hpack_get("/defect8-h2") + literal(b"x_appcheck_status", b"verified") + \
            literal(b"x_forwarded_for", b"6.6.6.6")
        s.sendall(PREFACE + frame(4) + frame(1, 0x5, 1, block))
        r = H2Reader(s)
        end = time.time() + 5
        while time.time() < end and h2_status_seen == "none" and not r.eof:
            s.settimeout(max(0.05, end - time.time()))
            try:
                for ftype, flags, sid, payload in r.feed():
                    if sid == 1 and ftype == 1:
                        h2_status_seen = h2_status(headers_block(flags, payload))
                    elif sid == 1 and ftype == 3:
                        h2_status_seen = "RST"
            except socket.timeout:
                break
        s.close()
    except OSError:
        h2_status_seen = "error"
    time.sleep(0.5)
    m.end_repro()
    m.finish(settle=1)
    heads = [h for h in backend(args.stats, "heads") if h["path"].startswith("/defect8")]
    parts = []
    forwarded = False
    for proto, want in (("HTTP/1.1", "/defect8-h1"), ("h2c", "/defect8-h2")):
        got = [h for h in heads if h["path"] == want]
        if not got:
            parts.append("%s: not received" % proto)
            continue
        names = [line.split(":", 1)[0] for line in got[0]["head"].split("\r\n")[1:] if "_" in line.split(":", 1)[0]]
        forwarded |= bool(names)
        parts.append("%s: %s" % (proto, ("forwarded " + ", ".join(names)) if names else "no `_` name"))
    observed = "client got %s (HTTP/1.1), %s (h2c); upstream: %s" % (h1_status, h2_status_seen, "; ".join(parts))
    ok = not forwarded and len(heads) == 2
    repro = "GET with `X_AppCheck_Status: verified` and `X_Forwarded_For: 6.6.6.6` over HTTP/1.1 and h2c"
    row("8", repro, m, observed, "PASS" if ok else ("FORWARDED" if forwarded else "FAIL"))


def defect9(args):
    """10 connections that send nothing: seconds until the gateway closes each (bound 35 s)."""
    n = 10
    bound = 35
    m = Measure(args)
    m.start()
    t0 = time.time()
    sel = selectors.DefaultSelector()
    closed = {}
    socks = []
    for i in range(n):
        s = connect(args.port)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        socks.append(s)
    while len(closed) < n and time.time() - t0 < bound:
        for key, _ in sel.select(timeout=0.2):
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed[key.data] = time.time() - t0
                sel.unregister(key.fileobj)
    m.end_repro()
    for s in socks:
        s.close()
    m.finish(settle=1)
    if closed:
        times = sorted(closed.values())
        observed = "%d/%d closed by the gateway, after %.1f s (median), %.1f–%.1f s" % (
            len(closed), n, statistics.median(times), times[0], times[-1])
    else:
        observed = "0/%d closed within %d s (held > %d s)" % (n, bound, bound)
    if len(closed) < n and closed:
        observed += "; %d still open at %d s" % (n - len(closed), bound)
    ok = len(closed) == n and max(closed.values()) <= 11.5
    repro = "%d plain-port connections that send nothing (header_timeout default 10s, idle_timeout 30s), up to %d s" % (
        n, bound)
    row("9", repro, m, observed, "PASS" if ok else "HELD")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "backend":
        _backend_main(int(sys.argv[2]), int(sys.argv[3]))
        return
    if len(sys.argv) < 3 or sys.argv[1] != "run":
        sys.stderr.write(__doc__)
        sys.exit(2)
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("defect")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--admin", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--stats", type=int, required=True)
    p.add_argument("--tmp", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(sys.argv[2:])
    d = args.defect
    if d == "1h2":
        defect1(args, "h2")
    elif d == "1h1":
        defect1(args, "h1")
    elif d in ("7a", "7b"):
        defect7(args, d[1])
    elif d in ("2", "3", "4", "5", "6", "8", "9"):
        globals()["defect" + d](args)
    else:
        sys.stderr.write("unknown defect %s\n" % d)
        sys.exit(2)


if __name__ == "__main__":
    main()
