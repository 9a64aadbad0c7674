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
    /// For an app extension (a widget, a notification service), the app it ships inside: it is
    /// installed after that app and removed with it.
    public var containingApp: String?
    /// The App ID prefix, when it is not the team ID: apps registered before 2011 kept a
    /// prefix of their own (a "seed ID"), which their application identifier and keychain
    /// groups carry. nil for the team ID, as every newer app has.
    public var appIDPrefix: String?
    /// A UIKit app on a Mac: built with Mac Catalyst, or an iPhone or iPad app running on an
    /// Apple silicon Mac. Its SecItem calls reach the data protection keychain alone, whatever
    /// they say (Security's `SecItemCategorizeQuery`: "it's iOS or bust if we're on MZ").
    /// nil for an app of the device's own platform.
    public var uikitOnMac: Bool?

    public init(
        bundleID: String, teamID: String, accessGroups: [String] = [], hasKeychainEntitlement: Bool = true, containingApp: String? = nil,
        appIDPrefix: String? = nil, uikitOnMac: Bool = false
    ) {
        self.uikitOnMac = uikitOnMac ? true : nil
        self.bundleID = bundleID
        self.teamID = teamID
        self.accessGroups = accessGroups
        self.hasKeychainEntitlement = hasKeychainEntitlement
        self.containingApp = containingApp
        self.appIDPrefix = appIDPrefix == teamID ? nil : appIDPrefix
    }

    /// `$(AppIdentifierPrefix)` in an entitlement: the team ID, or the app's own App ID prefix.
    public var prefix: String { appIDPrefix ?? teamID }

    /// `PREFIX.bundleID`, the app's own group, always entitled.
    public var applicationIdentifier: String { "\(prefix).\(bundleID)" }

    /// The `com.apple.security.application-groups` entitlement: the `group.` entries of
    /// `accessGroups`. Each is a keychain access group and a shared container (`Device.groupContainer`).
    public var appGroups: [String] { accessGroups.filter(Self.isAppGroup) }

    /// Whether a group names an app group (`group.…`) rather than a team's keychain group.
    public static func isAppGroup(_ group: String) -> Bool { group.hasPrefix("group.") }

    /// The groups the app may read and write, in Apple's order (`kSecAttrAccessGroup`): the
    /// keychain-access-groups entitlement, the application identifier, then the app groups.
    /// The first is where an add without `kSecAttrAccessGroup` lands.
    public var entitledGroups: [String] {
        guard hasKeychainEntitlement else { return [] }
        var groups = accessGroups.filter { !Self.isAppGroup($0) }
        if !groups.contains(applicationIdentifier) { groups.append(applicationIdentifier) }
        return groups + appGroups
    }

    /// The app as another developer team publishes it after an app transfer: the old team's
    /// groups take the new team's prefix, app groups (`group.`) keep their names.
    public func transferred(to team: String) -> AppManifest {
        let groups = accessGroups.map { $0.hasPrefix("\(teamID).") ? team + $0.dropFirst(teamID.count) : $0 }
        return AppManifest(
            bundleID: bundleID, teamID: team, accessGroups: groups, hasKeychainEntitlement: hasKeychainEntitlement, containingApp: containingApp,
            appIDPrefix: appIDPrefix, uikitOnMac: uikitOnMac == true)
    }

    /// Checks the shapes Apple enforces at signing time.
    public func validate() throws {
        try Self.validate(bundleID: bundleID)
        try Self.validate(teamID: teamID)
        if let appIDPrefix { try Self.validate(teamID: appIDPrefix, naming: "App ID prefix") }
        try Self.validate(accessGroups: accessGroups, teamID: teamID, appIDPrefix: appIDPrefix)
        if let containingApp { try Self.validate(extension: bundleID, of: containingApp) }
    }

    /// An app extension's bundle ID starts with its containing app's and a dot
    /// (`com.example.mail.widget` in `com.example.mail`), as Apple requires.
    public static func validate(extension bundleID: String, of containingApp: String) throws {
        try validate(bundleID: containingApp)
        guard bundleID.hasPrefix(containingApp + "."), !bundleID.dropFirst(containingApp.count + 1).isEmpty else {
            throw DeviceError(
                .invalidArgument,
                "'\(bundleID)' cannot be an extension of \(containingApp): an app extension's bundle ID starts with its app's, e.g. \(containingApp).widget.")
        }
    }

    public static func validate(bundleID: String) throws {
        let bundleCharacters = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: ".-"))
        guard !bundleID.isEmpty, bundleID.unicodeScalars.allSatisfy({ bundleCharacters.contains($0) && $0.isASCII }),
            !bundleID.hasPrefix("."), !bundleID.hasSuffix("."), !bundleID.contains("..")
        else {
            throw DeviceError(.invalidArgument, "'\(bundleID)' is not a bundle ID; use reverse-DNS letters, digits, dots and hyphens, e.g. com.example.app.")
        }
        // Apps and app groups share the names of sandboxes on a Keyferry device.
        guard !isAppGroup(bundleID) else {
            throw DeviceError(.invalidArgument, "'\(bundleID)' names an app group (group.…), not an app; give the app's own bundle ID.")
        }
    }

    /// A team ID, or an App ID prefix (`naming` says which): ten upper-case letters and digits.
    public static func validate(teamID: String, naming: String = "team ID") throws {
        guard teamID.count == 10, teamID.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("0"..."9").contains($0) }) else {
            throw DeviceError(.invalidArgument, "'\(teamID)' is not a valid \(naming): ten upper-case letters and digits, e.g. ABCDE12345.")
        }
    }

    public static func validate(accessGroups: [String], teamID: String, appIDPrefix: String? = nil) throws {
        let prefixes = [teamID] + (appIDPrefix.map { [$0] } ?? [])
        for group in accessGroups {
            guard prefixes.contains(where: { group.hasPrefix("\($0).") && group.count > $0.count + 1 }) || (group.hasPrefix("group.") && group.count > 6),
                !group.contains("/"), !group.contains(" ")
            else {
                let allowed = prefixes.map { "\($0)." }.joined(separator: ", ")
                throw DeviceError(.invalidArgument, "access group '\(group)' must start with the team ID or App ID prefix (\(allowed)) or 'group.'.")
            }
        }
    }
}
