import HTTPWire

extension RequestTarget {
    /// True when the query has a parameter named `X-Firebase-AppCheck` (any case, percent-decoded).
    public static func queryHasToken(_ query: Substring) -> Bool {
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? pair
            if name.utf8.count > 3 * 19 { continue }
            var decoded: [UInt8] = []
            var it = name.utf8.makeIterator()
            while let b = it.next() {
                if b == UInt8(ascii: "%"), let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) {
                    decoded.append(hv << 4 | lv)
                } else if b == UInt8(ascii: "+") {
                    decoded.append(UInt8(ascii: " "))
                } else {
                    decoded.append(b)
                }
            }
            if String(decoding: decoded, as: UTF8.self).lowercased() == "x-firebase-appcheck" { return true }
        }
        return false
    }

}
