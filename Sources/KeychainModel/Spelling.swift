/// The word someone most likely meant: for "did you mean" in a mistyped subcommand or field.
public enum Spelling {
    /// The candidate nearest to `word` (case-insensitive edit distance) when it is close enough
    /// to be a typo: at most two edits, and fewer than the word is long.
    /// A word that starts only one candidate stands for it too (`icloud` for `icloud-keychain`).
    public static func closest(to word: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word, $0)) }.min { $0.1 < $1.1 }
        if let (best, edits) = scored, edits <= 2, edits < word.count { return best }
        let started = candidates.filter { word.count >= 3 && $0.lowercased().hasPrefix(word.lowercased()) }
        return started.count == 1 ? started[0] : nil
    }

    /// Levenshtein distance, case-insensitive.
    public static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased())
        let b = Array(b.lowercased())
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
