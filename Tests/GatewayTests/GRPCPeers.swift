import Foundation
import Glibc
import TestSupport

/// Real gRPC peers nobody here wrote: Debian's python3-grpcio (`make deps-test`) as the client and as the upstream
/// server, with generic handlers over raw bytes (identity serializers: no code generation).
enum GRPCPeers {
    /// Debian's interpreter: python3-grpcio is installed for it, not for whatever `python3` is first in PATH.
    static let python = "/usr/bin/python3"

    /// One call, described by a JSON object in the file argv[1] names: `target`, `method`, `kind` (`unary`, `server_stream`,
    /// `client_stream`, `bidi`, `pingpong`), `requests` (hex), `metadata` ([[name, value]]), `timeout` (seconds).
    /// Prints one JSON line: `code`, `details`, `responses` (hex), `initial` and `trailing` metadata.
    static let clientScript = #"""
    import grpc, json, queue, sys, time
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    channel = grpc.insecure_channel(spec["target"], options=[("grpc.enable_http_proxy", 0)])
    kind, method = spec.get("kind", "unary"), spec["method"]
    metadata = [tuple(m) for m in spec.get("metadata", [])]
    requests = [bytes.fromhex(h) for h in spec.get("requests", [""])]
    timeout = spec.get("timeout")
    pause = spec.get("pause", 0)
    out = {}

    def md(items):
        return [[k, v if isinstance(v, str) else v.hex()] for k, v in (items or [])]

    try:
        if kind == "unary":
            response, call = channel.unary_unary(method).with_call(requests[0], metadata=metadata, timeout=timeout)
            responses = [response]
        elif kind == "server_stream":
            call = channel.unary_stream(method)(requests[0], metadata=metadata, timeout=timeout)
            responses = list(call)
        elif kind == "client_stream":
            response, call = channel.stream_unary(method).with_call(iter(requests), metadata=metadata, timeout=timeout)
            responses = [response]
        elif kind == "bidi":
            call = channel.stream_stream(method)(iter(requests), metadata=metadata, timeout=timeout)
            responses = list(call)
        else:
            # Ping-pong: each request is sent only after the answer to the previous one arrived, so the call works
            # only if responses are relayed while the request stream is still open.
            pending = queue.Queue()
            pending.put(requests[0])
            def source():
                sent = 0
                while sent < len(requests):
                    message = pending.get(timeout=20)
                    if sent > 0 and pause:
                        time.sleep(pause)
                    yield message
                    sent += 1
            call = channel.stream_stream(method)(source(), metadata=metadata, timeout=timeout)
            responses = []
            for response in call:
                responses.append(response)
                if len(responses) < len(requests):
                    pending.put(requests[len(responses)])
        out["code"] = call.code().name
        out["details"] = call.details()
        out["responses"] = [r.hex() for r in responses]
        out["initial"] = md(call.initial_metadata())
        out["trailing"] = md(call.trailing_metadata())
    except grpc.RpcError as e:
        out["code"] = e.code().name
        out["details"] = e.details()
        out["initial"] = md(e.initial_metadata())
        out["trailing"] = md(e.trailing_metadata())
    print(json.dumps(out))
    """#

    /// The upstream: service `test.Echo` with `Unary` (echoes), `Count` (server streaming: the request's first byte
    /// as a count, one byte per message), `Sum` (client streaming: the total length), `Chat` (bidirectional: echoes
    /// each message), `Fail` (NOT_FOUND with trailing metadata `x-custom: kept`), `Slow` (never answers; records
    /// when the call is cancelled) and `Stall` (one message, then nothing until cancelled, recorded); also as
    /// `test.Once`, `test.Bound`, `test.Open` and `chat.v1.ChatService` (the example config's). Every call's metadata
    /// and `time_remaining` (the deadline the server got, from `grpc-timeout`) is appended to the log file as a JSON
    /// line.
    static let serverScript = #"""
    import grpc, json, os, sys, threading, time
    from concurrent import futures
    port_file, log_file = sys.argv[1], sys.argv[2]
    lock = threading.Lock()

    def log(event, ctx, **extra):
        entry = {"event": event, "method": extra.pop("method", ""), **extra}
        if ctx is not None:
            entry["metadata"] = [[k, v if isinstance(v, str) else v.hex()] for k, v in ctx.invocation_metadata()]
            entry["time_remaining"] = ctx.time_remaining()
        with lock, open(log_file, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def unary(request, ctx):
        log("call", ctx, method="Unary")
        ctx.send_initial_metadata([("x-initial", "hello")])
        ctx.set_trailing_metadata([("x-trailing", "bye")])
        return request

    def count(request, ctx):
        log("call", ctx, method="Count")
        for i in range(request[0] if request else 0):
            yield bytes([i])

    def total(requests, ctx):
        log("call", ctx, method="Sum")
        return str(sum(len(r) for r in requests)).encode()

    def chat(requests, ctx):
        log("call", ctx, method="Chat")
        for r in requests:
            yield r

    def fail(request, ctx):
        log("call", ctx, method="Fail")
        ctx.set_trailing_metadata([("x-custom", "kept"), ("x-custom-bin", b"\x00\x01")])
        ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing: 100%")

    def slow(request, ctx):
        log("call", ctx, method="Slow")
        done = threading.Event()
        ctx.add_callback(done.set)
        done.wait(60)
        log("ended", None, method="Slow", active=ctx.is_active(), cancelled=done.is_set())
        return b""

    def stall(request, ctx):
        log("call", ctx, method="Stall")
        done = threading.Event()
        ctx.add_callback(done.set)
        yield b"first"
        done.wait(60)
        log("ended", None, method="Stall", active=ctx.is_active(), cancelled=done.is_set())

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Count": grpc.unary_stream_rpc_method_handler(count),
        "Sum": grpc.stream_unary_rpc_method_handler(total),
        "Chat": grpc.stream_stream_rpc_method_handler(chat),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
        "Stall": grpc.unary_stream_rpc_method_handler(stall),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    # The same methods under several service names, so a test's routes can differ by service.
    server.add_generic_rpc_handlers(tuple(grpc.method_handlers_generic_handler(name, handlers)
                                          for name in ("test.Echo", "test.Once", "test.Bound", "test.Open",
                                                    "chat.v1.ChatService")))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(port_file + ".tmp", port_file)
    server.wait_for_termination()
    """#

    /// A bare HTTP/2 server (Debian's python3-h2) that logs what gRPC servers hide: each request's fields and each
    /// RST_STREAM it receives. `…/Stall` gets a response head and one message, then nothing; anything else gets
    /// nothing at all. It keeps no deadline of its own, so a reset it sees came from the gateway.
    static let rawServerScript = #"""
    import json, os, socket, sys, threading
    import h2.config, h2.connection, h2.events
    port_file, log_file = sys.argv[1], sys.argv[2]
    lock = threading.Lock()

    def log(entry):
        with lock, open(log_file, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def serve(sock):
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        while True:
            try:
                data = sock.recv(65535)
            except OSError:
                data = b""
            if not data:
                log({"event": "closed"})
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    headers = [[k, v] for k, v in ev.headers]
                    path = dict(ev.headers).get(":path", "")
                    log({"event": "request", "stream": ev.stream_id, "path": path, "headers": headers})
                    if path.endswith("/Stall"):
                        conn.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "application/grpc")])
                        conn.send_data(ev.stream_id, b"\x00\x00\x00\x00\x05first")
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    log({"event": "reset", "stream": ev.stream_id, "code": int(ev.error_code)})
            out = conn.data_to_send()
            if out:
                sock.sendall(out)

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        s, _ = listener.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    """#

    /// A call's outcome as the grpcio client saw it.
    struct Result {
        var code: String
        var details: String
        var responses: [[UInt8]]
        var initial: [(String, String)]
        var trailing: [(String, String)]

        func trailing(_ name: String) -> [String] { trailing.filter { $0.0 == name }.map(\.1) }
        func initial(_ name: String) -> [String] { initial.filter { $0.0 == name }.map(\.1) }
    }

    /// A folder with both scripts.
    final class Scripts: @unchecked Sendable {
        let directory: String

        init() throws {
            directory = NSTemporaryDirectory() + "grpc-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try GRPCPeers.clientScript.write(toFile: directory + "/client.py", atomically: true, encoding: .utf8)
            try GRPCPeers.serverScript.write(toFile: directory + "/server.py", atomically: true, encoding: .utf8)
            try GRPCPeers.rawServerScript.write(toFile: directory + "/raw.py", atomically: true, encoding: .utf8)
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        /// Runs one call through the grpcio client against `127.0.0.1:port`.
        func call(_ port: UInt16, _ method: String, kind: String = "unary", requests: [[UInt8]] = [[]],
                  metadata: [(String, String)] = [], timeout: Double? = nil, pause: Double? = nil) throws -> Result {
            var spec: [String: Any] = [
                "target": "127.0.0.1:\(port)", "method": method, "kind": kind,
                "requests": requests.map { $0.map { String(format: "%02x", $0) }.joined() },
                "metadata": metadata.map { [$0.0, $0.1] },
            ]
            if let timeout { spec["timeout"] = timeout }
            if let pause { spec["pause"] = pause }  // pingpong: seconds between an answer and the next message
            // In a file: a large message does not fit in an argument list.
            let specPath = directory + "/call-\(UUID().uuidString).json"
            try JSONSerialization.data(withJSONObject: spec).write(to: URL(fileURLWithPath: specPath))
            defer { try? FileManager.default.removeItem(atPath: specPath) }
            let r = try BoundedCommand.run(GRPCPeers.python, [directory + "/client.py", specPath], timeout: 60)
            guard let line = r.stdout.split(separator: "\n").last,
                  let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let code = obj["code"] as? String else {
                throw HarnessError("grpcio client (python3-grpcio installed? make deps-test): \(r.status) \(r.stdout) \(r.stderr)")
            }
            func pairs(_ key: String) -> [(String, String)] {
                ((obj[key] as? [[String]]) ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
            }
            let responses = ((obj["responses"] as? [String]) ?? []).map(Self.bytes(hex:))
            return Result(code: code, details: obj["details"] as? String ?? "", responses: responses,
                          initial: pairs("initial"), trailing: pairs("trailing"))
        }

        static func bytes(hex: String) -> [UInt8] {
            var out: [UInt8] = []
            var i = hex.startIndex
            while i < hex.endIndex, let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex),
                  let b = UInt8(hex[i..<j], radix: 16) {
                out.append(b)
                i = j
            }
            return out
        }
    }

    /// The grpcio upstream server and its call log.
    final class Upstream: @unchecked Sendable {
        let process = Process()
        let port: UInt16
        let logPath: String

        /// `raw`: the bare HTTP/2 server instead of grpcio's.
        init(_ scripts: Scripts, raw: Bool = false) throws {
            let portPath = scripts.directory + "/port-\(UUID().uuidString)"
            logPath = scripts.directory + "/calls-\(UUID().uuidString).log"
            process.executableURL = URL(fileURLWithPath: GRPCPeers.python)
            process.arguments = [scripts.directory + (raw ? "/raw.py" : "/server.py"), portPath, logPath]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(15)
            var found: UInt16?
            while Date() < deadline, found == nil {
                if FileManager.default.fileExists(atPath: portPath) {
                    found = UInt16(try String(contentsOfFile: portPath, encoding: .utf8))
                } else {
                    usleep(20_000)
                }
            }
            guard let found else {
                // SIGKILL: test processes block SIGTERM, and their children inherit the mask.
                kill(process.processIdentifier, SIGKILL)
                throw HarnessError("the Python HTTP/2 server did not start (python3-grpcio, python3-h2 installed? make deps-test)")
            }
            port = found
        }

        var url: String { "http://127.0.0.1:\(port)" }

        /// Every logged event: `event`, `method`, `metadata` ([[name, value]]) and the `Slow` handler's end.
        func events() throws -> [[String: Any]] {
            try LogFile.completeLines(logPath).map { line in
                guard let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    throw HarnessError("bad log line \(line)")
                }
                return obj
            }
        }

        /// The metadata of each call the server received, in order.
        func calls() throws -> [(method: String, metadata: [(String, String)])] {
            try events().filter { $0["event"] as? String == "call" }.map { e in
                (e["method"] as? String ?? "", ((e["metadata"] as? [[String]]) ?? []).map { ($0[0], $0[1]) })
            }
        }

        /// Waits (at most `timeout` seconds) until the logged events satisfy `done`; the events at that point.
        func waitForEvents(timeout: Double = 15, _ done: ([[String: Any]]) -> Bool) throws -> [[String: Any]] {
            let deadline = Date().addingTimeInterval(timeout)
            var seen = try events()
            while !done(seen) && Date() < deadline {
                usleep(20_000)
                seen = try events()
            }
            return seen
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        }
    }
}
