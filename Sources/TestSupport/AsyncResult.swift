extension Result where Failure == any Error {
    /// `Result(catching:)` for an async body: a test that races operations keeps each one's error instead of
    /// reading it as a lost race.
    public init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
