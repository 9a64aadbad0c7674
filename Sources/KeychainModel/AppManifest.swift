import Foundation

/// An installed app as the keychain sees it: bundle ID, team ID and keychain access groups.
public struct AppManifest: Codable, Hashable, Sendable {
    public var bundleID: String
    public var teamID: String
    /// The `keychain-access-groups` entitlement, in order. May be empty.
    public var accessGroups: [String]
    /// False for a build signed without a team (a Simulator-only build): every keychain call
    /// fails with `errSecMissingEntitlement`.
    public var hasKeychainEntitlement: Bool

    public init(bundleID: String, teamID: String, accessGroups: [String] = [], hasKeychainEntitlement: Bool = true) {
        self.bundleID = bundleID
        self.teamID = teamID
        self.accessGroups = accessGroups
        self.hasKeychainEntitlement = hasKeychainEntitlement
    }

    /// `TEAMID.bundleID`, the app's own group, always entitled.
    public var applicationIdentifier: String { "\(teamID).\(bundleID)" }

    /// The groups the app may read and write, in Apple's order: the keychain-access-groups
    /// entitlement, then the application identifier. The first is where an add without
    /// `kSecAttrAccessGroup` lands.
    public var entitledGroups: [String] {
        guard hasKeychainEntitlement else { return [] }
        var groups = accessGroups
        if !groups.contains(applicationIdentifier) { groups.append(applicationIdentifier) }
        return groups
    }

    /// The app as another developer team publishes it after an app transfer: the old team's
    /// groups take the new team's prefix, app groups (`group.`) keep their names.
    public func transferred(to team: String) -> AppManifest {
        let groups = accessGroups.map { $0.hasPrefix("\(teamID).") ? team + $0.dropFirst(teamID.count) : $0 }
        return AppManifest(bundleID: bundleID, teamID: team, accessGroups: groups, hasKeychainEntitlement: hasKeychainEntitlement)
    }

    /// Checks the shapes Apple enforces at signing time.
    public func validate() throws {
        try Self.validate(bundleID: bundleID)
        try Self.validate(teamID: teamID)
        try Self.validate(accessGroups: accessGroups, teamID: teamID)
    }

    public static func validate(bundleID: String) throws {
        let bundleCharacters = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: ".-"))
        guard !bundleID.isEmpty, bundleID.unicodeScalars.allSatisfy({ bundleCharacters.contains($0) && $0.isASCII }),
            !bundleID.hasPrefix("."), !bundleID.hasSuffix("."), !bundleID.contains("..")
        else {
            throw DeviceError(.invalidArgument, "'\(bundleID)' is not a bundle ID; use reverse-DNS letters, digits, dots and hyphens, e.g. com.example.app.")
        }
    }

    public static func validate(teamID: String) throws {
        guard teamID.count == 10, teamID.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("0"..."9").contains($0) }) else {
            throw DeviceError(.invalidArgument, "'\(teamID)' is not a team ID; team IDs are ten upper-case letters and digits, e.g. ABCDE12345.")
        }
    }

    public static func validate(accessGroups: [String], teamID: String) throws {
        for group in accessGroups {
            guard group.hasPrefix("\(teamID).") || group.hasPrefix("group."), group.count > teamID.count + 1,
                !group.contains("/"), !group.contains(" ")
            else {
                throw DeviceError(.invalidArgument, "access group '\(group)' must start with the team ID (\(teamID).) or 'group.'.")
            }
        }
    }
}
