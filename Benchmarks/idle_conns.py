#!/usr/bin/env python3
"""Opens COUNT real keep-alive connections to the gateway and reports its resident memory.

Each connection sends one `GET / HTTP/1.1` and reads the whole response, so it is a kept-alive connection the
gateway has parsed a request on (not just an accepted socket). With all of them open and idle, it reads the
gateway's VmRSS from /proc/PID/status, then closes them and reads it again. It does this --passes times (default
2): memory that is reused comes back to the same level on pass 2; memory that keeps growing pass after pass is
retained (a leak, or allocator fragmentation). Prints human lines on stderr and one JSON object on stdout.
Connections come from 127.0.0.1, 127.0.0.2, ... (--per-address each), so the gateway's per-address bound stays on.

usage: idle_conns.py --port P --pid PID [--count 10000] [--admin ADMIN_PORT] [--hold 2] [--passes 2]
                     [--per-address 900]
"""
import argparse
import json
import resource
import socket
import sys
import time
import urllib.request

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def fd_limit(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return line.split()[3]
    return "?"


def raise_nofile(want=65536):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(target, soft), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def read_response(sock):
    """Reads one response with Content-Length (or chunked with a tiny body); returns (status, head)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed before the response head ({buf[:80]!r})")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        need = int(headers["content-length"])
        while len(body) < need:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed inside the body")
            body += chunk
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while not body.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed inside a chunked body")
            body += chunk
    return status, headers


def metric(admin, name):
    if not admin:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name):
                    return line
    except OSError:
        pass
    return None


def one_pass(args, log):
    socks, failures = [], []
    started = time.monotonic()
    for i in range(args.count):
        try:
            # From 127.0.0.1, 127.0.0.2, ...: at most --per-address connections from each, under the gateway's
            # default server.limits.max_connections_per_address (1,000), which is left on.
            source = f"127.0.0.{1 + i // args.per_address}"
            s = socket.create_connection(("127.0.0.1", args.port), timeout=10, source_address=(source, 0))
            s.sendall(REQUEST)
            status, headers = read_response(s)
            if status != 200 or headers.get("connection", "").lower() == "close":
                failures.append(f"#{i}: status {status}, connection={headers.get('connection')}")
            socks.append(s)
        except OSError as e:
            failures.append(f"#{i}: {type(e).__name__}: {e}")
            if len(failures) > 20:
                break
    opened = time.monotonic() - started
    log(f"opened {len(socks)} connections in {opened:.1f}s ({len(failures)} failures)")
    for f in failures[:10]:
        log(f"  failure {f}")

    time.sleep(args.hold)
    loaded = status_kib(args.pid, "VmRSS")
    anon_loaded = status_kib(args.pid, "RssAnon")
    hwm = status_kib(args.pid, "VmHWM")
    open_metric = metric(args.admin, 'gateway_connections{state="open"}')

    # Are they still real keep-alive connections? Ask again on a few of them.
    alive = 0
    probes = sorted({0, len(socks) // 2, len(socks) - 1}) if socks else []
    for i in probes:
        try:
            socks[i].sendall(REQUEST)
            status, _ = read_response(socks[i])
            alive += status == 200
        except OSError as e:
            log(f"  probe on connection #{i} failed: {e}")

    for s in socks:
        s.close()
    time.sleep(args.hold)
    return {
        "connections": len(socks), "failures": len(failures), "opened": opened, "loaded": loaded,
        "anon_loaded": anon_loaded, "hwm": hwm, "open_metric": open_metric, "alive": alive,
        "probes": len(probes), "after_close": status_kib(args.pid, "VmRSS"),
        "anon_after_close": status_kib(args.pid, "RssAnon"),
        "open_after_close": metric(args.admin, 'gateway_connections{state="open"}'),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="the gateway's pid (for /proc/PID/status)")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--per-address", type=int, default=900,
                    help="connections per source address (127.0.0.N); the gateway's per-address bound is 1,000")
    ap.add_argument("--admin", type=int, default=0)
    ap.add_argument("--hold", type=float, default=2.0, help="seconds to wait with all connections idle")
    ap.add_argument("--passes", type=int, default=2,
                    help="open/close the connections this many times (a second pass tells a leak from reuse)")
    args = ap.parse_args()

    nofile = raise_nofile()
    if nofile < args.count + 64:
        sys.exit(f"idle_conns.py: open-files limit {nofile} is too low for {args.count} connections")
    gw_nofile = fd_limit(args.pid)
    log = lambda msg: print(f"[idle_conns] {msg}", file=sys.stderr, flush=True)
    log(f"client open-files limit {nofile}; gateway's 'Max open files' {gw_nofile}")

    baseline = status_kib(args.pid, "VmRSS")
    log(f"gateway baseline VmRSS {baseline / 1024:.1f} MiB")

    passes = []
    for p in range(args.passes):
        passes.append(one_pass(args, log))
    first = passes[0]
    loaded, hwm, after_close, alive, probes, failures, socks_n, opened, open_metric = (
        first["loaded"], first["hwm"], first["after_close"], first["alive"], first["probes"],
        first["failures"], first["connections"], first["opened"], first["open_metric"])
    for i, r in enumerate(passes[1:], start=2):
        log(f"pass {i}: VmRSS with {r['connections']} connections {r['loaded'] / 1024:.1f} MiB, after closing "
            f"{r['after_close'] / 1024:.1f} MiB (pass 1: {loaded / 1024:.1f} / {after_close / 1024:.1f})")

    per_conn = (loaded - baseline) / max(1, socks_n)
    log(f"gateway VmRSS with {socks_n} idle connections: {loaded / 1024:.1f} MiB "
        f"(+{(loaded - baseline) / 1024:.1f} MiB, {per_conn:.2f} KiB/connection); VmHWM {hwm / 1024:.1f} MiB; "
        f"after closing them: {after_close / 1024:.1f} MiB (RssAnon {first['anon_after_close'] / 1024:.1f} MiB, "
        f"open gauge then: {first['open_after_close']}); metrics: {open_metric}; probes alive {alive}/{probes}")
    print(json.dumps({
        "connections": socks_n, "failures": failures, "open_seconds": round(opened, 2),
        "baseline_kib": baseline, "loaded_kib": loaded, "hwm_kib": hwm, "after_close_kib": after_close,
        "per_connection_kib": round(per_conn, 2), "open_metric": open_metric,
        "probes": probes, "probes_alive": alive, "client_nofile": nofile, "gateway_nofile": gw_nofile,
        "anon_loaded_kib": first["anon_loaded"], "anon_after_close_kib": first["anon_after_close"],
        "open_after_close": first["open_after_close"],
        "passes": [{k: r[k] for k in ("connections", "failures", "loaded", "after_close")} for r in passes],
    }))
    return 0 if all(r["failures"] == 0 and r["alive"] == r["probes"] for r in passes) else 1


if __name__ == "__main__":
    sys.exit(main())
