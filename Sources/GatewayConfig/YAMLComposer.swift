import CLibYAML

/// Builds the `Node` tree of one YAML document from libyaml's events, in one pass.
///
/// What it decides (docs/configuration.md, "YAML"):
/// - A key repeated in one mapping is reported at each later occurrence, `duplicate key 'K' (first at L:C)`, and the
///   last occurrence is kept, so every other error in the file is still found in the same load. Keys compare as
///   text after YAML's own unescaping: `"thr\x65ads"` and `threads` are one key, and so are `1` and `"1"`.
/// - An alias stands for the node its anchor named; an alias to an anchor not yet complete is undefined.
/// - Lists and mappings nest at most `maxDepth` deep; the file holds exactly one document.
/// - The document, with every alias counted as the text its anchor names, is at most `maxExpandedBytes` (issue 39:
///   a 3 MB scalar aliased 6,000 times took `check-config` 118 s, and a SIGHUP reload as long): the alias that
///   passes it is reported and the load stops.
/// - A syntax error stops the load: it is reported with libyaml's own words and position.
struct YAMLComposer {
    /// Deepest nesting of lists and mappings (a configuration needs 6).
    static let maxDepth = 100
    /// Largest size of the document with its aliases written out: each scalar's bytes plus one per node (so a nest
    /// of aliased lists counts every item it stands for). Twice the largest file (`ConfigLoader.maxFileBytes`): a
    /// file without aliases never reaches it, and the decoder's work stays within a few passes over 8 MiB.
    static let maxExpandedBytes = 2 * ConfigLoader.maxFileBytes

    /// The document's root node, or nil once an error that ends the load (or an empty file) has been reported.
    static func compose(_ yaml: String, _ decoder: ConfigDecoder) -> Node? {
        var text = yaml
        return text.withUTF8 { bytes -> Node? in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else {
                decoder.error(.start, "cannot parse YAML: out of memory")
                return nil
            }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            // libyaml asserts a non-null input; an empty string may have no storage.
            let empty: [UInt8] = [0]
            return empty.withUnsafeBufferPointer { fallback -> Node? in
                yaml_parser_set_input_string(&parser, bytes.baseAddress ?? fallback.baseAddress, bytes.count)
                var composer = YAMLComposer(decoder: decoder)
                return composer.run(&parser, bytes)
            }
        }
    }

    /// A list or mapping whose end event has not come yet.
    private struct Frame {
        let isMapping: Bool
        let mark: Mark
        let anchor: String?
        /// `expanded` when the collection started: its own size is what was added since, plus one.
        var expandedAtStart = 0
        var items: [Node] = []
        /// A mapping's pairs in order; a pair replaced by a later occurrence of its key is nil.
        var pairs: [(key: Node, value: Node)?] = []
        var pendingKey: (node: Node, mark: Mark)?
        /// A mapping's text keys: where each pair is, and where the key was first written.
        var slots: [String: (slot: Int, first: Mark)] = [:]

        init(isMapping: Bool, mark: Mark, anchor: String?) {
            self.isMapping = isMapping
            self.mark = mark
            self.anchor = anchor
        }
    }

    private let decoder: ConfigDecoder
    private var stack: [Frame] = []
    /// Each anchor's node and its expanded size (what an alias to it adds to `expanded`).
    private var anchors: [String: (node: Node, size: Int)] = [:]
    /// The document's size so far with every alias written out (`maxExpandedBytes`).
    private var expanded = 0
    private var root: Node?

    private init(decoder: ConfigDecoder) { self.decoder = decoder }

    private mutating func run(_ parser: inout yaml_parser_t, _ bytes: UnsafeBufferPointer<UInt8>) -> Node? {
        var documents = 0
        var event = yaml_event_t()
        while true {
            guard yaml_parser_parse(&parser, &event) == 1 else {
                reportParserError(parser, bytes)
                return nil
            }
            defer { yaml_event_delete(&event) }
            let mark = Mark(line: Int(event.start_mark.line) + 1, column: Int(event.start_mark.column) + 1)
            switch event.type {
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 {
                    decoder.error(ConfigPosition(mark), "YAML structure error: a second document starts here; "
                        + "the configuration is a single document")
                    return nil
                }
            case YAML_STREAM_END_EVENT:
                if root == nil {
                    decoder.error(.start, "the configuration is empty; app_check and routes are required")
                }
                return root
            case YAML_ALIAS_EVENT:
                guard let (node, size) = anchors[Self.text(event.data.alias.anchor) ?? ""] else {
                    decoder.error(ConfigPosition(mark), "YAML structure error: found undefined alias")
                    return nil
                }
                expanded += size
                guard expanded <= Self.maxExpandedBytes else {
                    decoder.error(ConfigPosition(mark), "YAML structure error: with its aliases written out the "
                        + "configuration passes \(ConfigValueParser.formatSize(Int64(Self.maxExpandedBytes))) here; "
                        + "write the value out instead of aliasing it so often")
                    return nil
                }
                attach(node, mark)
            case YAML_SCALAR_EVENT:
                let scalar = event.data.scalar
                let value = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
                let node = Node.scalar(.init(string: value, style: Self.style(scalar.style), mark: mark))
                expanded += scalar.length + 1
                if let anchor = Self.text(scalar.anchor) { anchors[anchor] = (node, scalar.length + 1) }
                attach(node, mark)
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                guard stack.count < Self.maxDepth else {
                    decoder.error(ConfigPosition(mark),
                                  "YAML structure error: lists and mappings nest deeper than \(Self.maxDepth) levels here")
                    return nil
                }
                let isMapping = event.type == YAML_MAPPING_START_EVENT
                let anchor = Self.text(isMapping ? event.data.mapping_start.anchor : event.data.sequence_start.anchor)
                var frame = Frame(isMapping: isMapping, mark: mark, anchor: anchor)
                frame.expandedAtStart = expanded
                stack.append(frame)
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let frame = stack.popLast() else { continue }  // libyaml pairs every end with a start
                let node: Node = frame.isMapping
                    ? .mapping(.init(pairs: frame.pairs.compactMap { $0 }, mark: frame.mark))
                    : .sequence(.init(items: frame.items, mark: frame.mark))
                expanded += 1
                if let anchor = frame.anchor { anchors[anchor] = (node, expanded - frame.expandedAtStart) }
                attach(node, frame.mark)
            default:
                continue  // stream start, document end
            }
        }
    }

    /// Adds a finished node to the collection being built (or makes it the root). `mark` is where it was written:
    /// for an alias, the alias itself, not its anchor.
    private mutating func attach(_ node: Node, _ mark: Mark) {
        guard !stack.isEmpty else {
            root = node
            return
        }
        let top = stack.count - 1
        guard stack[top].isMapping else {
            stack[top].items.append(node)
            return
        }
        guard let (key, keyMark) = stack[top].pendingKey else {
            stack[top].pendingKey = (node, mark)
            return
        }
        stack[top].pendingKey = nil
        let slot = stack[top].pairs.count
        if case let .scalar(scalar) = key {
            if let earlier = stack[top].slots[scalar.string] {
                decoder.error(ConfigPosition(keyMark),
                              "duplicate key '\(scalar.string)' (first at \(ConfigPosition(earlier.first)))")
                stack[top].pairs[earlier.slot] = nil
                stack[top].slots[scalar.string] = (slot, earlier.first)
            } else {
                stack[top].slots[scalar.string] = (slot, keyMark)
            }
        }
        stack[top].pairs.append((key, node))
    }

    private func reportParserError(_ parser: yaml_parser_t, _ bytes: UnsafeBufferPointer<UInt8>) {
        let problem = Self.text(parser.problem) ?? "unknown problem"
        switch parser.error {
        case YAML_READER_ERROR:
            // Reader errors carry a byte offset, not a mark: count lines and scalars up to it.
            let end = min(max(0, parser.problem_offset), bytes.count)
            var position = ConfigPosition.start
            for byte in bytes[..<end] {
                if byte == 0x0A {
                    position.line += 1
                    position.column = 1
                } else if byte & 0xC0 != 0x80 {
                    position.column += 1
                }
            }
            decoder.error(position, "cannot read YAML: \(problem)")
        case YAML_SCANNER_ERROR, YAML_PARSER_ERROR:
            var message = "YAML syntax error: \(problem)"
            if let context = Self.text(parser.context) {
                message += " (\(context) at \(parser.context_mark.line + 1):\(parser.context_mark.column + 1))"
            }
            let position = ConfigPosition(line: Int(parser.problem_mark.line) + 1, column: Int(parser.problem_mark.column) + 1)
            if Self.hasTab(bytes, line: position.line, upTo: position.column) {
                message += "; the line has a tab before this point: YAML indents with spaces only, never tabs"
            }
            decoder.error(position, message)
        case YAML_MEMORY_ERROR:
            decoder.error(.start, "cannot parse YAML: out of memory")
        default:
            decoder.error(.start, "cannot parse YAML: \(problem)")
        }
    }

    /// True when 1-based `line` of the text has a tab in its first `column` characters (libyaml's scanner says only
    /// "found character that cannot start any token" for a tab where a token should start).
    static func hasTab(_ bytes: UnsafeBufferPointer<UInt8>, line: Int, upTo column: Int) -> Bool {
        var current = 1
        var seen = 0
        for byte in bytes {
            if byte == 0x0A {
                if current == line { return false }
                current += 1
                continue
            }
            guard current == line else { continue }
            if byte & 0xC0 == 0x80 { continue }
            seen += 1
            if seen > column { return false }
            if byte == 0x09 { return true }
        }
        return false
    }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    private static func text(_ pointer: UnsafeMutablePointer<UInt8>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    private static func style(_ style: yaml_scalar_style_t) -> Node.Scalar.Style {
        switch style {
        case YAML_PLAIN_SCALAR_STYLE: .plain
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .any
        }
    }
}
