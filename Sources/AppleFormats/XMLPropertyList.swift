package import Foundation

/// Apple's XML property lists, written only: a backup's `Info.plist` is one. Keys sorted, so the
/// same value always gives the same bytes; text escaped as XML requires.
package enum XMLPropertyList {
    /// `value` as an XML plist; a UID or DER's null has no XML form and is refused.
    package static func encode(_ value: PropertyList) throws -> Data {
        var lines = [
            #"<?xml version="1.0" encoding="UTF-8"?>"#,
            #"<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">"#,
            #"<plist version="1.0">"#,
        ]
        try element(value, depth: 0, into: &lines)
        lines.append("</plist>")
        return Data((lines.joined(separator: "\n") + "\n").utf8)
    }

    private static func element(_ value: PropertyList, depth: Int, into lines: inout [String]) throws {
        let indent = String(repeating: "\t", count: depth)
        switch value {
        case .string(let text): lines.append("\(indent)<string>\(escaped(text))</string>")
        case .data(let data): lines.append("\(indent)<data>\(data.base64EncodedString())</data>")
        case .integer(let number): lines.append("\(indent)<integer>\(number)</integer>")
        case .real(let number): lines.append("\(indent)<real>\(number)</real>")
        case .boolean(let flag): lines.append("\(indent)<\(flag ? "true" : "false")/>")
        case .date(let date): lines.append("\(indent)<date>\(date.formatted(.iso8601))</date>")
        case .array(let elements):
            lines.append("\(indent)<array>")
            for element in elements { try self.element(element, depth: depth + 1, into: &lines) }
            lines.append("\(indent)</array>")
        case .dictionary(let entries):
            lines.append("\(indent)<dict>")
            for key in entries.keys.sorted() {
                lines.append("\(indent)\t<key>\(escaped(key))</key>")
                try element(entries[key]!, depth: depth + 1, into: &lines)
            }
            lines.append("\(indent)</dict>")
        case .uid, .null:
            throw PropertyListError("a \(value) has no XML property-list form")
        }
    }

    /// XML's three special characters escaped; the control characters XML 1.0 cannot hold at
    /// all (all of C0 but tab, newline and return) become U+FFFD.
    private static func escaped(_ text: String) -> String {
        let allowed = String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { $0.value < 0x20 && ![0x09, 0x0A, 0x0D].contains($0.value) ? "\u{FFFD}" : $0 }))
        return allowed.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
