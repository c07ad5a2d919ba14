import Foundation

extension ConfigDecoder {
    /// `dashboard:` (docs/dashboard.md): `min_requests` (whole number ≥ 0), `ready_share` (0 to 1), `history_file`
    /// (empty, or a path whose folder exists).
    func decodeDashboard(_ node: Node) -> DashboardSettings {
        var d = DashboardSettings()
        guard let f = fields(node, "dashboard", known: ["min_requests", "ready_share", "history_file"]) else { return d }
        if let v = f.value("min_requests"), let n = int(v, "dashboard.min_requests", in: 0...1_000_000_000) {
            d.minRequests = n
        }
        if let v = f.value("ready_share"), let text = string(v, "dashboard.ready_share") {
            if let share = Double(text), share.isFinite, (0...1).contains(share) {
                d.readyShare = share
            } else {
                error(v, "dashboard.ready_share must be a number between 0 and 1 (e.g. 0.99), got '\(text)'")
            }
        }
        if let v = f.value("history_file"), let path = string(v, "dashboard.history_file") {
            let folder = (path as NSString).deletingLastPathComponent
            var isDirectory: ObjCBool = false
            if !path.isEmpty && path.hasSuffix("/") {
                error(v, "dashboard.history_file must name a file, got the folder '\(path)'")
            } else if !path.isEmpty && !folder.isEmpty
                        && !(FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) && isDirectory.boolValue) {
                error(v, "dashboard.history_file: folder '\(folder)' does not exist")
            } else {
                d.historyFile = path
            }
        }
        return d
    }
}
