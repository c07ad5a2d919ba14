import Testing
@testable import HTTPWire

/// `StreamTable` against a `Dictionary` as the model: every insert, replace, look-up and removal gives the same
/// answer, through growth and the backward-shift removal, for ids in the order a client sends them, for ids that
/// share a slot, and for random ids.
@Suite struct StreamTableTests {
    final class Box {
        let n: Int
        init(_ n: Int) { self.n = n }
    }

    /// Applies the same operations to the table and the model, checking every answer and, after each step, that
    /// every id of the model is found and the count agrees.
    static func replay(_ ops: [(insert: Bool, id: Int32)]) {
        var table = StreamTable<Box>()
        var model: [Int32: Box] = [:]
        for (step, op) in ops.enumerated() {
            if op.insert {
                let box = Box(step)
                table[op.id] = box
                model[op.id] = box
            } else {
                #expect(table.removeValue(forKey: op.id) === model.removeValue(forKey: op.id))
            }
            #expect(table.count == model.count)
            for (id, box) in model { #expect(table[id] === box, "id \(id) after step \(step)") }
        }
        #expect(Set(table.keys) == Set(model.keys))
        #expect(Set(table.values.map(\.n)) == Set(model.values.map(\.n)))
        for id in Int32(1)...Int32(64) where model[id] == nil { #expect(table[id] == nil) }
    }

    @Test func clientOrderIdsOpenAndCloseLikeAConnection() {
        var ops: [(insert: Bool, id: Int32)] = []
        var open: [Int32] = []
        var next: Int32 = 1
        var rng = SplitMix(seed: 7)
        for _ in 0..<2_000 {
            if open.count < 20, rng.next() % 3 != 0 {
                ops.append((true, next))
                open.append(next)
                next += 2
            } else if !open.isEmpty {
                let i = Int(rng.next() % UInt64(open.count))
                ops.append((false, open.remove(at: i)))
            }
        }
        Self.replay(ops)
    }

    @Test func randomIdsWithReplacementsAndMissingRemovals() {
        var rng = SplitMix(seed: 42)
        let ops = (0..<3_000).map { _ in
            (insert: rng.next() % 2 == 0, id: Int32(truncatingIfNeeded: rng.next() % 97 + 1))
        }
        Self.replay(ops)
    }

    /// Ids that all land in one home slot still resolve (the probe runs), and removing from the middle of the run
    /// keeps the ones behind reachable.
    @Test func idsSharingASlot() {
        var table = StreamTable<Box>()
        table[1] = Box(1)
        // Find ids with the same home as 1 in the current 8-slot table without growing past it.
        var same: [Int32] = []
        var id: Int32 = 3
        while same.count < 3 {
            if table.home(id) == table.home(1) { same.append(id) }
            id += 2
        }
        var model: [Int32: Int] = [1: 1]
        for s in same {
            table[s] = Box(Int(s))
            model[s] = Int(s)
        }
        #expect(table.count == 4)
        #expect(table.removeValue(forKey: same[0])?.n == Int(same[0]))
        model[same[0]] = nil
        for (id, n) in model { #expect(table[id]?.n == n) }
        #expect(table[same[0]] == nil)
    }

    @Test func removeAllEmptiesAndTheTableIsUsableAgain() {
        var table = StreamTable<Box>()
        for id in stride(from: Int32(1), through: 99, by: 2) { table[id] = Box(Int(id)) }
        #expect(table.count == 50)
        #expect(table[51]?.n == 51)
        table.removeAll()
        #expect(table.isEmpty)
        #expect(table[51] == nil)
        #expect(table.values.isEmpty)
        table[101] = Box(101)
        #expect(table[101]?.n == 101)
        table[101] = nil
        #expect(table.isEmpty)
    }

    /// A small deterministic generator, so a failure names its seed and replays.
    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}
