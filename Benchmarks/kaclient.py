#!/usr/bin/env python3
"""Sends exactly N `GET` requests over one keep-alive HTTP/1.1 connection, one at a time, and checks each
response is 200. A fixed request count (not a fixed duration) is what makes instruction counts comparable.

usage: kaclient.py --port P --requests N [--path /] [--header 'Name: value' ...]
                   [--tokens FILE [--token-offset K] [--cycle]] [--proofs FILE [--proof-offset K]]
With --tokens, request i carries `X-Firebase-AppCheck: <line K+i of FILE>`; without --cycle running past the
end of the file is an error (fresh tokens must not repeat), with --cycle it wraps. With --proofs, request i
carries `DPoP: <line K+i of FILE>` (never repeated: running past the end is an error); the token then comes from
--header.
Exit 1 on any non-200 or a closed connection. Prints "requests=N seconds=S" on stdout.
"""
import argparse
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--path", default="/")
    ap.add_argument("--header", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--tokens")
    ap.add_argument("--token-offset", type=int, default=0)
    ap.add_argument("--cycle", action="store_true")
    ap.add_argument("--proofs")
    ap.add_argument("--proof-offset", type=int, default=0)
    args = ap.parse_args()

    extra = "".join(h + "\r\n" for h in args.header)
    request = f"GET {args.path} HTTP/1.1\r\nHost: bench\r\n{extra}\r\n".encode()
    tokens = []
    if args.tokens:
        with open(args.tokens) as f:
            tokens = [line.strip() for line in f if line.strip()]
        if not tokens:
            sys.exit(f"kaclient.py: no tokens in {args.tokens}")
        if not args.cycle and args.token_offset + args.requests > len(tokens):
            sys.exit(f"kaclient.py: {args.tokens} holds {len(tokens)} tokens, "
                     f"{args.token_offset + args.requests} needed (offset {args.token_offset})")
        requests = [f"GET {args.path} HTTP/1.1\r\nHost: bench\r\n{extra}X-Firebase-AppCheck: {t}\r\n\r\n".encode()
                    for t in tokens]
    proofs = []
    if args.proofs:
        if tokens:
            sys.exit("kaclient.py: --proofs and --tokens together are not supported")
        with open(args.proofs) as f:
            proofs = [line.strip() for line in f if line.strip()]
        if args.proof_offset + args.requests > len(proofs):
            sys.exit(f"kaclient.py: {args.proofs} holds {len(proofs)} proofs, "
                     f"{args.proof_offset + args.requests} needed (offset {args.proof_offset})")
        requests = [f"GET {args.path} HTTP/1.1\r\nHost: bench\r\n{extra}DPoP: {p}\r\n\r\n".encode()
                    for p in proofs[args.proof_offset:args.proof_offset + args.requests]]
    sock = socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    started = time.monotonic()
    for i in range(args.requests):
        if tokens:
            request = requests[(args.token_offset + i) % len(tokens)]
        elif proofs:
            request = requests[i]
        sock.sendall(request)
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                head = buf[:end].decode("latin-1")
                length = 0
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                    elif k.strip().lower() == "transfer-encoding":
                        sys.exit(f"kaclient.py: request #{i}: chunked response not supported: {head!r}")
                if len(buf) >= end + 4 + length:
                    status = head.split(" ", 2)[1]
                    if status != "200":
                        sys.exit(f"kaclient.py: request #{i}: status {status}: {head!r}")
                    buf = buf[end + 4 + length:]
                    break
            chunk = sock.recv(65536)
            if not chunk:
                sys.exit(f"kaclient.py: connection closed after {i} responses")
            buf += chunk
    elapsed = time.monotonic() - started
    sock.close()
    print(f"requests={args.requests} seconds={elapsed:.3f}")


if __name__ == "__main__":
    main()
