/// The HTTP/2 peers of `H2UpstreamTests`, on hyper-h2 (Debian's python3-h2, `make deps-test`): a library nobody here
/// wrote, so what the gateway sends is read by an independent HTTP/2 implementation.
enum H2Peers {
    /// The upstream server.
    static let upstream = #"""
# An HTTP/2 upstream for the gateway's tests, on hyper-h2 (Debian's python3-h2): h2c with prior knowledge, or TLS
# with ALPN when a certificate is given. One thread per connection; every event is logged as one JSON line.
#   h2_upstream.py PORT_FILE LOG_FILE OPTIONS_JSON
# OPTIONS: max_streams, window (initial stream window; 0 = never grants any), goaway_after (requests per connection,
# then GOAWAY naming the last one, open streams finish, the connection closes), refuse_first (the first N requests, over
# all connections, are answered RST_STREAM(REFUSED_STREAM) and logged as "refused" with their headers), cert/key/alpn (TLS).
# Paths: /echo (the body back; ?trailers=1 adds response trailers), /trickle (three parts 1.5 s apart), /hold?n=N (answered once N /hold requests are
# open at once, across connections), /wait (never answered), /reset (RST_STREAM), /bigheader (a 100 KB field),
# /raw/NAME (the frames RAW[NAME] written by hand: a malformed response hyper-h2 would refuse to send, or a good one
# at the edge of the rules; hyper-h2 never learns of them, so the stream stays open on its side until the gateway
# resets it, which is logged as "reset").
import json, os, socket, ssl, sys, threading, time
import h2.config, h2.connection, h2.events, h2.settings, hyperframe.frame

def hpack_int(n):
    # RFC 7541 §5.1, a 7-bit prefix (the string lengths below; no Huffman coding).
    if n < 127:
        return bytes([n])
    out, n = [127], n - 127
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n])

def fields(*pairs):
    # Literal fields without indexing, new names (RFC 7541 §6.2.2): any bytes at all, and no dynamic table entry.
    block = b""
    for name, value in pairs:
        name, value = name.encode("latin-1"), value.encode("latin-1")
        block += b"\x00" + hpack_int(len(name)) + name + hpack_int(len(value)) + value
    return block

OK, NO_CONTENT = b"\x88", b"\x89"  # :status 200 and 204 (HPACK static table, indices 8 and 9)
def status(code):
    return fields((":status", code))
def cl(n):
    return fields(("content-length", n))
def headers(block, end=False):
    return (1, 0x4 | (0x1 if end else 0), block)  # HEADERS with END_HEADERS (and END_STREAM)
def data(payload, end=False):
    return (0, 0x1 if end else 0, payload)

# Each name is one response; "EXCESS" marks bytes that must never reach the gateway's client.
RAW = {
    "no-status": [headers(fields(("x", "y")), True)],
    "status-twice": [headers(OK + OK, True)],
    "status-after-field": [headers(fields(("x", "y")) + OK, True)],
    "status-two-digits": [headers(status("20"), True)],
    "status-not-digits": [headers(status("2x0"), True)],
    "status-upper-case": [headers(fields((":Status", "200")), True)],
    "status-101": [headers(status("101"), True)],
    "request-pseudo": [headers(OK + fields((":path", "/")), True)],
    "unknown-pseudo": [headers(OK + fields((":x", "1")), True)],
    "upper-case-name": [headers(OK + fields(("X-Up", "1")), True)],
    "space-in-name": [headers(OK + fields(("x y", "1")), True)],
    "empty-name": [headers(OK + fields(("", "1")), True)],
    "colon-in-name": [headers(OK + fields(("x:y", "1")), True)],
    "nul-in-value": [headers(OK + fields(("x", "a\x00b")), True)],
    "cr-in-value": [headers(OK + fields(("x", "a\rb")), True)],
    "lf-in-value": [headers(OK + fields(("x", "a\nb")), True)],
    "del-in-value": [headers(OK + fields(("x", "a\x7fb")), True)],
    "leading-space": [headers(OK + fields(("x", " a")), True)],
    "trailing-tab": [headers(OK + fields(("x", "a\t")), True)],
    "connection": [headers(OK + fields(("connection", "close")), True)],
    "keep-alive": [headers(OK + fields(("keep-alive", "timeout=5")), True)],
    "proxy-connection": [headers(OK + fields(("proxy-connection", "close")), True)],
    "transfer-encoding": [headers(OK + fields(("transfer-encoding", "chunked")), True)],
    "upgrade": [headers(OK + fields(("upgrade", "h2c")), True)],
    "te-gzip": [headers(OK + fields(("te", "gzip")), True)],
    "two-content-lengths": [headers(OK + cl("2") + cl("2")), data(b"ok", True)],
    "content-length-not-a-number": [headers(OK + cl("1x")), data(b"x", True)],
    "content-length-empty": [headers(OK + cl("")), data(b"", True)],
    "content-length-on-a-head-ending-the-stream": [headers(OK + cl("5"), True)],
    "content-length-1-in-a-204": [headers(NO_CONTENT + cl("1"), True)],
    "content-length-in-an-interim-head": [headers(status("103") + cl("0")), headers(OK, True)],
    "interim-head-ending-the-stream": [headers(status("103"), True)],
    "data-after-an-interim-head": [headers(status("103")), data(b"EXCESS", True)],
    # Past the head: the gateway's client has the head already; the rest must not follow.
    "data-over-content-length": [headers(OK + cl("2")), data(b"okEXCESS", True)],
    "data-under-content-length": [headers(OK + cl("10")), data(b"ok", True)],
    "data-after-a-204": [headers(NO_CONTENT), data(b"EXCESS", True)],
    "data-to-head": [headers(OK + cl("6")), data(b"EXCESS", True)],
    "trailers-without-end-stream": [headers(OK), data(b"ok"), headers(fields(("x-t", "EXCESS"))), data(b"", True)],
    "pseudo-field-in-trailers": [headers(OK), data(b"ok"), headers(OK + fields(("x-t", "EXCESS")), True)],
    "upper-case-trailer": [headers(OK), data(b"ok"), headers(fields(("X-T", "EXCESS")), True)],
    "connection-trailer": [headers(OK), data(b"ok"), headers(fields(("x-t", "EXCESS"), ("connection", "close")), True)],
    "control-byte-in-a-trailer": [headers(OK), data(b"ok"), headers(fields(("x-t", "EXCESS\x01")), True)],
    "content-length-in-trailers-too": [headers(OK + cl("2")), data(b"ok"), headers(fields(("x-t", "EXCESS")) + cl("2"), True)],
    # Good ones at the edge of the rules.
    "good-204-with-content-length-0": [headers(NO_CONTENT + cl("0") + fields(("x-kept", "1")), True)],
    "good-head-with-content-length": [headers(OK + cl("10"), True)],
    "good-interim-then-final": [headers(status("103") + fields(("link", "</a>; rel=preload"))),
                                headers(OK + cl("2")), data(b"ok", True)],
    "good-te-trailers-obs-text-and-htab": [headers(OK + fields(("te", "trailers"), ("x-v", "a\tb \xe9"))), data(b"ok", True)],
}

port_file, log_file, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
log_lock = threading.Lock()
hold_lock = threading.Condition()
held = []  # (conn, stream_id)
refuse_left = [options.get("refuse_first", 0)]

def log(**event):
    with log_lock:
        with open(log_file, "a") as f:
            f.write(json.dumps(event) + "\n")

class Conn:
    count = 0
    def __init__(self, sock):
        Conn.count += 1
        self.id = Conn.count
        self.sock = sock
        self.lock = threading.Lock()
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                                                       validate_inbound_headers=True))
        self.streams = {}  # id -> {"headers", "body", "trailers"}
        self.requests = 0
        self.goaway_sent = False
        self.last_stream = 0
        self.open = set()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def respond(self, sid, status, headers, body=b"", trailers=None):
        with self.lock:
            try:
                self.h2.send_headers(sid, [(":status", str(status))] + headers, end_stream=not body and not trailers)
                if body:
                    self.h2.send_data(sid, body, end_stream=not trailers)
                if trailers:
                    self.h2.send_headers(sid, trailers, end_stream=True)
                self.flush()
            except Exception as e:
                log(event="send_failed", conn=self.id, stream=sid, error=str(e))
            self.open.discard(sid)
            self.maybe_close()

    def trickle(self, sid):
        # The head, then one part every 1.5 s (three), then the end: slower than a 1 s response_timeout.
        try:
            with self.lock:
                self.h2.send_headers(sid, [(":status", "200"), ("content-type", "text/event-stream")])
                self.flush()
            for i in range(3):
                time.sleep(1.5)
                with self.lock:
                    self.h2.send_data(sid, ("data: part%d\n\n" % i).encode())
                    self.flush()
            with self.lock:
                self.h2.end_stream(sid)
                self.flush()
        except Exception as e:
            log(event="send_failed", conn=self.id, stream=sid, error=str(e))

    def maybe_close(self):
        if self.goaway_sent and not self.open:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def request_done(self, sid):
        s = self.streams[sid]
        h = dict(s["headers"])
        path = h.get(":path", "")
        log(event="request", conn=self.id, stream=sid, path=path, headers=s["headers"], trailers=s["trailers"],
            body=len(s["body"]))
        if path.startswith("/echo"):
            headers = [("content-type", "text/plain"), ("x-te", h.get("te", "-")),
                       ("x-request-trailers", json.dumps(s["trailers"]))]
            trailers = None
            if "trailers=1" in path:
                trailers = [("grpc-status", "0"), ("x-trailer", "done"), ("set-cookie", "forbidden=1")]
            threading.Thread(target=self.respond, args=(sid, 200, headers, s["body"] or b"echo", trailers)).start()
        elif path.startswith("/hold"):
            n = int(path.split("n=")[1])
            with hold_lock:
                held.append((self, sid))
                if len(held) >= n:
                    ready = list(held)
                    held.clear()
                    for conn, stream in ready:
                        threading.Thread(target=conn.respond, args=(stream, 200, [], b"held")).start()
        elif path.startswith("/reset"):
            with self.lock:
                self.h2.reset_stream(sid, error_code=2)
                self.flush()
                self.open.discard(sid)
        elif path.startswith("/raw/"):
            with self.lock:
                self.flush()
                for kind, flags, payload in RAW[path[len("/raw/"):]]:
                    self.sock.sendall(len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big")
                                      + payload)
        elif path.startswith("/bigheader"):
            threading.Thread(target=self.respond, args=(sid, 200, [("x-big", "b" * 100000)], b"x")).start()
        elif path.startswith("/manyheaders"):
            fields = [("x-many-%d" % i, "m" * 8000) for i in range(10)]
            threading.Thread(target=self.respond, args=(sid, 200, fields, b"x")).start()
        elif path.startswith("/trickle"):
            threading.Thread(target=self.trickle, args=(sid,)).start()
        elif path.startswith("/wait"):
            pass
        else:
            threading.Thread(target=self.respond, args=(sid, 404, [], b"no")).start()

    def run(self):
        log(event="connection", conn=self.id)
        settings = {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: options.get("max_streams", 100)}
        if "window" in options:
            settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = options["window"]
        with self.lock:
            self.h2.local_settings = h2.settings.Settings(client=False, initial_values=settings)
            self.h2.initiate_connection()
            self.flush()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                with self.lock:
                    events = self.h2.receive_data(data)
                    self.flush()
                done = []
                for e in events:
                    if isinstance(e, h2.events.RequestReceived):
                        if self.goaway_sent and e.stream_id > self.last_stream:
                            log(event="ignored", conn=self.id, stream=e.stream_id)
                            continue
                        if refuse_left[0] > 0:
                            refuse_left[0] -= 1
                            log(event="refused", conn=self.id, stream=e.stream_id, headers=[list(x) for x in e.headers])
                            with self.lock:
                                self.h2.reset_stream(e.stream_id, error_code=7)
                                self.flush()
                            continue
                        self.streams[e.stream_id] = {"headers": [list(x) for x in e.headers], "body": b"",
                                                     "trailers": []}
                        self.open.add(e.stream_id)
                        self.requests += 1
                        goaway = options.get("goaway_after")
                        if goaway and self.requests == goaway and not self.goaway_sent:
                            with self.lock:
                                # A GOAWAY frame of our own: hyper-h2's close_connection would stop the open streams too.
                                self.goaway_sent = True
                                self.last_stream = e.stream_id
                                self.flush()
                                frame = hyperframe.frame.GoAwayFrame(0)
                                frame.last_stream_id = e.stream_id
                                frame.error_code = 0
                                self.sock.sendall(frame.serialize())
                            log(event="goaway", conn=self.id, last_stream=e.stream_id)
                    elif isinstance(e, h2.events.DataReceived):
                        if e.stream_id in self.streams:
                            self.streams[e.stream_id]["body"] += e.data
                        if options.get("window", 1) != 0:
                            with self.lock:
                                self.h2.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                                self.flush()
                    elif isinstance(e, h2.events.TrailersReceived):
                        self.streams[e.stream_id]["trailers"] = [list(x) for x in e.headers]
                    elif isinstance(e, h2.events.StreamEnded):
                        done.append(e.stream_id)
                    elif isinstance(e, h2.events.StreamReset):
                        log(event="reset", conn=self.id, stream=e.stream_id, code=int(e.error_code))
                        self.open.discard(e.stream_id)
                for sid in done:
                    if sid in self.streams:
                        self.request_done(sid)
                with self.lock:
                    self.maybe_close()
        except Exception as e:
            log(event="error", conn=self.id, error=repr(e))
        log(event="closed", conn=self.id)
        self.sock.close()

def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    context = None
    if options.get("cert"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(options["cert"], options["key"])
        context.set_alpn_protocols([options.get("alpn", "h2")])
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context:
            try:
                sock = context.wrap_socket(sock, server_side=True)
            except Exception as e:
                log(event="tls_failed", error=repr(e))
                sock.close()
                continue
            log(event="alpn", protocol=sock.selected_alpn_protocol())
        threading.Thread(target=Conn(sock).run, daemon=True).start()

main()
"""#

    /// A client that sends request trailers and resets streams (what curl and nghttp cannot be told to do).
    static let client = #"""
# An HTTP/2 client for the gateway's tests, on hyper-h2: h2c with prior knowledge. Prints one JSON line.
#   h2_client.py PORT MODE [UPSTREAM_LOG]
# trailers: POST /echo?trailers=1 with a body and request trailers; the status, headers, body and trailers.
# reset: GET /wait, RST_STREAM(CANCEL) once the upstream logged it, then GET /echo on the same connection.
import json, socket, sys, time
import h2.config, h2.connection, h2.events

port, mode = int(sys.argv[1]), sys.argv[2]
sock = socket.create_connection(("127.0.0.1", port), timeout=20)
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
sock.sendall(conn.data_to_send())
out = {}

def request(path, method="GET", body=None, trailers=None):
    sid = conn.get_next_available_stream_id()
    headers = [(":method", method), (":path", path), (":scheme", "http"), (":authority", "127.0.0.1"), ("te", "trailers")]
    conn.send_headers(sid, headers, end_stream=body is None)
    if body is not None:
        conn.send_data(sid, body, end_stream=trailers is None)
        if trailers:
            conn.send_headers(sid, trailers, end_stream=True)
    sock.sendall(conn.data_to_send())
    return sid

def wait(sid):
    result = {"headers": [], "body": "", "trailers": []}
    while True:
        data = sock.recv(65536)
        if not data:
            result["closed"] = True
            return result
        for e in conn.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                result["headers"] = [list(x) for x in e.headers]
            elif isinstance(e, h2.events.DataReceived):
                conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                if e.stream_id == sid:
                    result["body"] += e.data.decode()
            elif isinstance(e, h2.events.TrailersReceived) and e.stream_id == sid:
                result["trailers"] = [list(x) for x in e.headers]
            elif isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
                sock.sendall(conn.data_to_send())
                return result
            elif isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                result["reset"] = int(e.error_code)
                return result
        sock.sendall(conn.data_to_send())

if mode == "trailers":
    sid = request("/echo?trailers=1", "POST", b"ping", [("x-req-trailer", "yes"), ("x-appcheck-status", "forged")])
    out = wait(sid)
elif mode == "reset":
    log = sys.argv[3]
    sid = request("/wait")
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(log) as f:
            if '"path": "/wait"' in f.read():
                break
        time.sleep(0.02)
    conn.reset_stream(sid, error_code=8)
    sock.sendall(conn.data_to_send())
    out = wait(request("/echo"))
print(json.dumps(out))
"""#
}
