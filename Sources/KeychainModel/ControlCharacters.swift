extension String {
    /// Control characters (newlines and escape sequences among them) and the marks that turn
    /// text's direction (U+202E and its kin) as `\u{1B}`: text from outside (a device name in an
    /// archive, a member's name, a relay's refusal) written as is could forge log lines,
    /// rewrite the terminal, or show a name reversed.
    package var escapingControlCharacters: String {
        guard unicodeScalars.contains(where: Self.isHidden) else { return self }
        return unicodeScalars.map { scalar in
            Self.isHidden(scalar) ? "\\u{\(String(scalar.value, radix: 16, uppercase: true))}" : String(scalar)
        }.joined()
    }

    /// Each line escaped, the line breaks kept: for a message of several lines.
    package var escapingControlCharactersButNewlines: String {
        split(separator: "\n", omittingEmptySubsequences: false).map { String($0).escapingControlCharacters }.joined(separator: "\n")
    }

    /// C0 and C1 controls, and the bidirectional marks, embeddings, overrides and isolates.
    private static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || (0x200E...0x200F).contains(scalar.value) || (0x202A...0x202E).contains(scalar.value)
            || (0x2066...0x2069).contains(scalar.value) || scalar.value == 0x061C
    }
}
