/// A 1-based line and column in the YAML text, as libyaml counts them (columns in Unicode scalars).
struct Mark: Sendable, Equatable {
    var line: Int
    var column: Int
}

/// The YAML tree that `YAMLComposer` builds from libyaml's events and `ConfigDecoder` reads.
///
/// Scalars stay text: no tag is resolved (the decoder types every value itself, so `1` and `"1"` are the same
/// key), and aliases are already replaced by the node their anchor names. A mapping holds each key once: the
/// composer reports a repeated key and keeps its last occurrence.
enum Node: Sendable {
    case scalar(Scalar)
    case mapping(Mapping)
    case sequence(Sequence)

    struct Scalar: Sendable {
        /// libyaml's scalar styles (`yaml_scalar_style_t`).
        enum Style: Sendable {
            case any, plain, singleQuoted, doubleQuoted, literal, folded
        }

        let string: String
        let style: Style
        let mark: Mark
    }

    struct Mapping: RandomAccessCollection, Sendable {
        let pairs: [(key: Node, value: Node)]
        /// Where the mapping starts: its first key for a block mapping, the `{` of a flow mapping.
        let mark: Mark

        var startIndex: Int { pairs.startIndex }
        var endIndex: Int { pairs.endIndex }
        subscript(position: Int) -> (key: Node, value: Node) { pairs[position] }
    }

    struct Sequence: RandomAccessCollection, Sendable {
        let items: [Node]
        /// Where the list starts: its first `-` for a block list, the `[` of a flow list.
        let mark: Mark

        var startIndex: Int { items.startIndex }
        var endIndex: Int { items.endIndex }
        subscript(position: Int) -> Node { items[position] }
    }

    var mark: Mark {
        switch self {
        case let .scalar(scalar): scalar.mark
        case let .mapping(mapping): mapping.mark
        case let .sequence(sequence): sequence.mark
        }
    }
}
