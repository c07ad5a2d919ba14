#!/usr/bin/env python3
"""Issue 23's measurements of the issuer under attack, against one gateway binary: run it on the binary from
before the fixes and on the current one, and the two outputs are the closing note's "before and after". Run by
hand (not part of make test); needs wrk and openssl. Only loopback addresses are used: the attacker is 127.0.0.1,
the real clients 127.0.0.2 (all of 127.0.0.0/8 is loopback on Linux).

    GATEWAY_BIN=.build/release/appcheck-gateway Benchmarks/issuer_abuse.py [--phases flood,cap,slow] [--quick]

Phases (each on a fresh gateway, 2 loop threads, memory state, the issuer's default limits unless said):
  flood  wrk, 8 connections from 127.0.0.1 for 20 s, exchangeDebugToken with a wrong secret for app A; meanwhile
         a client at 127.0.0.2 alternates generateAppAttestChallenge (app A) and exchangeDebugToken (app B, the
         right secret) every 100 ms. Prints the flood's request rate and each real request kind's successes.
  cap    the rate limits raised out of the way (process 1,000,000/s, and per address where the binary has it):
         wrk floods generateAppAttestChallenge from 127.0.0.1 for 10 s, then 50 challenge requests from 127.0.0.2.
  slow   the rate limits raised out of the way: 4,000 connections from 127.0.0.1 each declare Content-Length
         65,536 on exchangeDebugToken, send 65,535 bytes and wait 10 s; then they close. Prints RSS before, the peak, and 60 s after they closed, and how
         the connections were answered.
The config uses only keys the binary's own check-config accepts (the per-address keys are added when it does).
"""
import argparse
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time

APP_A = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
APP_B = "1:123456789012:ios:bbbbbbbbbbbbbbbb"
SECRET_A = "bench-secret-app-a-0123456789abcdef"
SECRET_B = "bench-secret-app-b-0123456789abcdef"
BASE = "/appcheck/v1/projects/123456789012/apps/"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Gateway:
    def __init__(self, binary, tmp, extra_issuer_lines):
        self.binary = binary
        self.port = free_port()
        self.admin = free_port()
        key = os.path.join(tmp, "sign.pem")
        self.config = os.path.join(tmp, "gateway.yaml")
        issuer_lines = "\n".join("  " + line for line in extra_issuer_lines)
        with open(self.config, "w") as f:
            f.write(f"""server:
  listen: ["127.0.0.1:{self.port}"]
  admin_listen: "127.0.0.1:{self.admin}"
  threads: 2
  log_level: error
app_check:
  project_number: "123456789012"
  jwks: {{ url: "http://127.0.0.1:9/jwks" }}
upstreams:
  api: {{ url: "http://127.0.0.1:9" }}
routes:
  - name: open
    prefix: /
    upstream: api
    enforcement: off
issuer:
  issuer_url: https://api.example.com/appcheck
  signing_keys: [{key}]
{issuer_lines}
  apps:
    - app_id: "{APP_A}"
      team_id: ABCDE12345
      bundle_id: com.example.app
      app_attest: {{ environments: [production] }}
      debug_secrets: ["{SECRET_A}"]
    - app_id: "{APP_B}"
      debug_secrets: ["{SECRET_B}"]
""")
        check = subprocess.run([binary, "check-config", "--config", self.config], capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"check-config refused the bench config:\n{check.stdout}{check.stderr}")
        self.proc = subprocess.Popen([binary, "serve", "--config", self.config], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("gateway did not start")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def request(port, path, body, source="127.0.0.2", timeout=5.0):
    """One POST on a new connection from `source`; the status, or 0 when there was no answer."""
    data = body.encode()
    msg = (f"POST {path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data
    try:
        s = socket.socket()
        s.settimeout(timeout)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(msg)
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        s.close()
        return int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
    except (OSError, ValueError, IndexError):
        return 0


def wrk(port, path, body, seconds, tmp, connections=8):
    script = os.path.join(tmp, "post.lua")
    with open(script, "w") as f:
        f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                f"wrk.body = '{body}'\n")
    return subprocess.Popen(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", script,
                             f"http://127.0.0.1:{port}{path}"], stdout=subprocess.PIPE, text=True)


def wrk_summary(proc):
    out = proc.communicate()[0]
    rate, non2xx = "?", "0"
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            rate = line.split()[1]
        if "Non-2xx" in line:
            non2xx = line.split()[-1]
    return rate, non2xx


def has_new_keys(binary, tmp):
    gw_probe = os.path.join(tmp, "probe.yaml")
    with open(gw_probe, "w") as f:
        f.write('app_check: { project_number: "123456789012" }\nupstreams: { api: { url: "http://127.0.0.1:9" } }\n'
                "routes: [{ name: r, prefix: /, upstream: api, enforcement: off }]\n"
                "issuer: { issuer_url: https://x.example.com, signing_keys: [" + os.path.join(tmp, "sign.pem") + "], "
                "max_exchanges_per_address: 5, apps: [{ app_id: \"" + APP_B + "\", debug_secrets: [\"" + SECRET_B + "\"] }] }\n")
    return subprocess.run([binary, "check-config", "--config", gw_probe], capture_output=True).returncode == 0


def phase_flood(binary, tmp, quick):
    gw = Gateway(binary, tmp, [])
    try:
        seconds = 5 if quick else 20
        flood = wrk(gw.port, BASE + APP_A + ":exchangeDebugToken", '{"debug_token":"wrong-guess-0123456789abcdef"}',
                    seconds, tmp)
        time.sleep(0.5)
        ok = {"challenge": 0, "debug": 0}
        sent = {"challenge": 0, "debug": 0}
        end = time.time() + seconds - 1
        turn = 0
        while time.time() < end:
            if turn % 2 == 0:
                sent["challenge"] += 1
                ok["challenge"] += request(gw.port, BASE + APP_A + ":generateAppAttestChallenge", "") == 200
            else:
                sent["debug"] += 1
                ok["debug"] += request(gw.port, BASE + APP_B + ":exchangeDebugToken",
                                       '{"debug_token":"%s"}' % SECRET_B) == 200
            turn += 1
            time.sleep(0.1)
        rate, non2xx = wrk_summary(flood)
        print(f"flood: wrk {rate} req/s from 127.0.0.1 ({non2xx} non-2xx); from 127.0.0.2: "
              f"challenges {ok['challenge']}/{sent['challenge']}, debug exchanges (app B) {ok['debug']}/{sent['debug']}")
    finally:
        gw.stop()


def phase_cap(binary, tmp, quick):
    extra = ["max_exchanges_per_second: 1000000"]
    if has_new_keys(binary, tmp):
        extra.append("max_exchanges_per_address: 1000000")
    gw = Gateway(binary, tmp, extra)
    try:
        flood = wrk(gw.port, BASE + APP_A + ":generateAppAttestChallenge", "", 5 if quick else 10, tmp)
        rate, non2xx = wrk_summary(flood)
        statuses = {}
        for _ in range(50):
            s = request(gw.port, BASE + APP_A + ":generateAppAttestChallenge", "")
            statuses[s] = statuses.get(s, 0) + 1
        print(f"cap: wrk {rate} challenge req/s from 127.0.0.1 ({non2xx} non-2xx); then 50 from 127.0.0.2: "
              + ", ".join(f"{n} × {s}" for s, n in sorted(statuses.items())))
    finally:
        gw.stop()


def phase_slow(binary, tmp, quick, default_limits=False):
    count = 1000 if quick else 4000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 1000)), hard))
    # The rate limits out of the way (the defaults answer most of these 429 before their bodies are read): what is
    # measured is what the bodies cost.
    extra = [] if default_limits else ["max_exchanges_per_second: 1000000"]
    if has_new_keys(binary, tmp) and not default_limits:
        extra.append("max_exchanges_per_address: 0")
    gw = Gateway(binary, tmp, extra)
    try:
        time.sleep(1)
        before = rss_mib(gw.proc.pid)
        head = (f"POST {BASE}{APP_A}:exchangeDebugToken HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                "Content-Length: 65536\r\n\r\n").encode()
        body = b" " * 65535
        socks = []
        peak = before
        for i in range(count):
            s = socket.socket()
            s.connect(("127.0.0.1", gw.port))
            s.setblocking(False)
            try:
                s.send(head)
            except BlockingIOError:
                pass
            socks.append([s, memoryview(body), b""])
            if i % 200 == 0:
                peak = max(peak, rss_mib(gw.proc.pid))
        # Push the bodies (non-blocking; the gateway may stop reading some), reading any answers.
        end = time.time() + 10
        while time.time() < end:
            for entry in socks:
                s, rest, got = entry
                if rest:
                    try:
                        n = s.send(rest[:16384])
                        entry[1] = rest[n:]
                    except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                        pass
                try:
                    chunk = s.recv(4096)
                    if chunk:
                        entry[2] = got + chunk
                except (BlockingIOError, ConnectionResetError):
                    pass
            peak = max(peak, rss_mib(gw.proc.pid))
            time.sleep(0.05)
        answers = {}
        for _, _, got in socks:
            key = got.split(b"\r\n")[0].decode(errors="replace") if got else "no answer yet"
            answers[key] = answers.get(key, 0) + 1
        held = rss_mib(gw.proc.pid)
        for s, _, _ in socks:
            s.close()
        time.sleep(60)
        after = rss_mib(gw.proc.pid)
        print(f"slow: {count} connections × 65,535 of 65,536 bytes: RSS before {before:.1f} MiB, peak {peak:.1f}, "
              f"while held {held:.1f}, 60 s after they closed {after:.1f}; answers: "
              + "; ".join(f"{n} × {k}" for k, n in sorted(answers.items(), key=lambda kv: -kv[1])))
    finally:
        gw.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", default="flood,cap,slow")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--default-limits", action="store_true",
                    help="slow: keep the issuer's default rate limits (most connections are then refused before their bodies)")
    args = ap.parse_args()
    binary = os.environ.get("GATEWAY_BIN", ".build/release/appcheck-gateway")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"issuer_abuse: no gateway binary at {binary} (set GATEWAY_BIN)")
    with tempfile.TemporaryDirectory(prefix="issuer-abuse-") as tmp:
        subprocess.run(["openssl", "genrsa", "-out", os.path.join(tmp, "sign.pem"), "2048"], check=True,
                       capture_output=True)
        for phase in args.phases.split(","):
            if phase == "slow":
                phase_slow(binary, tmp, args.quick, args.default_limits)
            else:
                {"flood": phase_flood, "cap": phase_cap}[phase](binary, tmp, args.quick)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
