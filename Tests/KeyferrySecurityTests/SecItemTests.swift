import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferrySecurity
import Testing

/// Apple's SecItem semantics, exercised through Keychain Services as app code calls it.
@Suite("SecItem semantics")
struct SecItemTests {
    let t: TestDevice
    let keychain: Keychain
    let app: SecCaller

    init() throws {
        t = try TestDevice(
            biometry: true,
            apps: [
                AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID, accessGroups: ["\(TestDevice.teamID).shared"]),
                AppManifest(bundleID: "com.example.widget", teamID: TestDevice.teamID, accessGroups: ["\(TestDevice.teamID).shared"]),
                AppManifest(bundleID: "com.other.app", teamID: "ZYXWV98765"),
                AppManifest(bundleID: "com.unsigned.app", teamID: "ZYXWV98765", hasKeychainEntitlement: false),
            ])
        keychain = try t.keychain()
        app = SecCaller(t, TestDevice.appID)
    }

    /// Keychain Services calls as `bundleID`, on the test's device.
    func caller(_ bundleID: String) -> SecCaller { SecCaller(t, bundleID) }

    func add(_ attributes: [String: Any], in app: SecCaller? = nil) -> OSStatus {
        var base: [String: Any] = [kSecClass: kSecClassGenericPassword]
        base.merge(attributes) { $1 }
        return (app ?? self.app).SecItemAdd(base, nil)
    }

    func copy(_ query: [String: Any], in app: SecCaller? = nil) -> (OSStatus, CFTypeRef?) {
        var base: [String: Any] = [kSecClass: kSecClassGenericPassword]
        base.merge(query) { $1 }
        var result: CFTypeRef?
        let status = (app ?? self.app).SecItemCopyMatching(base, &result)
        return (status, result)
    }

    @Test("copy returns one match by default; kSecMatchLimitAll returns an array")
    func matchLimitDefaults() {
        #expect(add([kSecAttrAccount: "a", kSecValueData: Data("1".utf8)]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "b", kSecValueData: Data("2".utf8)]) == errSecSuccess)
        let (status, one) = copy([kSecReturnData: true])
        #expect(status == errSecSuccess)
        #expect(one as? Data == Data("1".utf8))
        let (_, all) = copy([kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll])
        #expect((all as? [Any])?.count == 2)
        let (_, two) = copy([kSecReturnData: true, kSecMatchLimit: 2])
        #expect((two as? [Any])?.count == 2)
    }

    @Test(
        "text attributes are blobs, as on Apple's devices: data is taken and read back as data, found by that data and not by the string it spells; data attributes take a string's bytes; numbers and flags take NSNumbers and booleans"
    )
    func blobAttributes() throws {
        let account = Data("alice".utf8)
        #expect(add([kSecAttrAccount: account, kSecAttrService: Data("mail".utf8), kSecAttrGeneric: "g", kSecValueData: Data("1".utf8)]) == errSecSuccess)
        #expect(add([kSecAttrAccount: account, kSecAttrService: Data("mail".utf8)]) == errSecDuplicateItem)
        let (status, found) = copy([kSecAttrAccount: account, kSecReturnAttributes: true])
        #expect(status == errSecSuccess)
        let attributes = try #require(found as? [String: Any])
        #expect(attributes[kSecAttrAccount] as? Data == account)
        #expect(attributes[kSecAttrService] as? Data == Data("mail".utf8))
        #expect(attributes[kSecAttrGeneric] as? String == "g", "a blob keeps a string as a string")
        // The string "alice" is another value (SQLite never finds text equal to a blob): not found,
        // and a second item may take it.
        #expect(copy([kSecAttrAccount: "alice"]).0 == errSecItemNotFound)
        #expect(add([kSecAttrAccount: "alice", kSecAttrService: "mail"]) == errSecSuccess)
        let (_, byString) = copy([kSecAttrAccount: "alice", kSecReturnAttributes: true])
        #expect((byString as? [String: Any])?[kSecAttrAccount] as? String == "alice")
        #expect(add([kSecAttrAccount: 42]) == errSecParam)

        let key: [String: Any] = [
            kSecClass: kSecClassKey, kSecAttrApplicationTag: "com.example.key", kSecAttrKeySizeInBits: NSNumber(value: 256),
            kSecAttrCanSign: NSNumber(value: true), kSecAttrIsPermanent: 1, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
            kSecValueData: Data("k".utf8), kSecReturnAttributes: true,
        ]
        var added: CFTypeRef?
        #expect(app.SecItemAdd(key, &added) == errSecSuccess)
        let keyAttributes = try #require(added as? [String: Any])
        #expect(keyAttributes[kSecAttrApplicationTag] as? Data == Data("com.example.key".utf8))
        #expect(keyAttributes[kSecAttrKeySizeInBits] as? Int == 256)
        #expect(keyAttributes[kSecAttrCanSign] as? Bool == true)
        #expect(keyAttributes[kSecAttrIsPermanent] as? Bool == true)
    }

    @Test("an update touches every match, or with a match limit the first ones added, as Apple's server selects them")
    func updateMatchLimit() {
        for account in ["a", "b", "c"] { #expect(add([kSecAttrAccount: account, kSecValueData: Data("old".utf8)]) == errSecSuccess) }
        let one: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitOne]
        #expect(app.SecItemUpdate(one, [kSecValueData: Data("one".utf8)]) == errSecSuccess)
        func value(_ account: String) -> String? {
            (copy([kSecAttrAccount: account, kSecReturnData: true]).1 as? Data).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect([value("a"), value("b"), value("c")] == ["one", "old", "old"])
        #expect(app.SecItemUpdate([kSecClass: kSecClassGenericPassword], [kSecValueData: Data("all".utf8)]) == errSecSuccess)
        #expect([value("a"), value("b"), value("c")] == ["all", "all", "all"])
    }

    @Test("an under-specified delete removes every match; a match limit on delete other than kSecMatchLimitAll is errSecParam")
    func deleteTouchesAll() {
        #expect(add([kSecAttrAccount: "a"]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "b"]) == errSecSuccess)
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitOne]) == errSecParam)
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecMatchLimit: 1]) == errSecParam)
        #expect(copy([kSecMatchLimit: kSecMatchLimitAll]).0 == errSecSuccess, "a refused delete removed nothing")
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword]) == errSecSuccess)
        #expect(copy([:]).0 == errSecItemNotFound)
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword]) == errSecItemNotFound)

        // As Apple's server does: kSecMatchLimitAll says what a delete does anyway.
        #expect(add([kSecAttrAccount: "c"]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "d"]) == errSecSuccess)
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitAll]) == errSecSuccess)
        #expect(copy([:]).0 == errSecItemNotFound)
    }

    @Test("a search without kSecAttrSynchronizable sees only local items; SynchronizableAny sees both")
    func synchronizableClause() {
        #expect(add([kSecAttrAccount: "local"]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "synced", kSecAttrSynchronizable: true]) == errSecSuccess)
        let (_, plain) = copy([kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll])
        #expect((plain as? [[String: Any]])?.map { $0[kSecAttrAccount] as? String } == ["local"])
        let (_, synced) = copy([kSecAttrSynchronizable: true, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll])
        #expect((synced as? [[String: Any]])?.map { $0[kSecAttrAccount] as? String } == ["synced"])
        let (_, both) = copy([kSecAttrSynchronizable: kSecAttrSynchronizableAny, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll])
        #expect((both as? [Any])?.count == 2)
        // The same account may exist once local and once synced: sync is part of the primary key.
        #expect(add([kSecAttrAccount: "local", kSecAttrSynchronizable: true]) == errSecSuccess)
    }

    @Test("return data, attributes and persistent references in their Apple shapes")
    func returnTypes() throws {
        var added: CFTypeRef?
        let status = app.SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecAttrLabel: "Label",
                kSecValueData: Data("s".utf8), kSecReturnPersistentRef: true,
            ], &added)
        #expect(status == errSecSuccess)
        let reference = try #require(added as? Data)
        let (_, attributes) = copy([kSecValuePersistentRef: reference, kSecReturnAttributes: true, kSecReturnData: true])
        let dictionary = try #require(attributes as? [String: Any])
        #expect(dictionary[kSecAttrAccount] as? String == "a")
        #expect(dictionary[kSecAttrLabel] as? String == "Label")
        #expect(dictionary[kSecAttrAccessible] as? String == kSecAttrAccessibleWhenUnlocked)
        #expect(dictionary[kSecAttrAccessGroup] as? String == "\(TestDevice.teamID).shared")
        #expect(dictionary[kSecValueData] as? Data == Data("s".utf8))
        #expect(dictionary[kSecAttrService] as? String == "", "missing primary-key attributes default to the empty string")
        // No return keys: success with no result, the "success but nil" trap of seed 004.
        let (bare, nothing) = copy([kSecAttrAccount: "a"])
        #expect(bare == errSecSuccess && nothing == nil)
    }

    @Test(
        "kSecReturnRef on a password, as Apple's server answers it: no ref object, nil alone, attributes and secret beside other return keys; on a key, errSecUnimplemented"
    )
    func returnRef() throws {
        #expect(add([kSecAttrAccount: "a", kSecAttrLabel: "Label", kSecValueData: Data("s".utf8)]) == errSecSuccess)
        let (alone, nothing) = copy([kSecAttrAccount: "a", kSecReturnRef: true])
        #expect(alone == errSecSuccess && nothing == nil)
        let (status, result) = copy([kSecAttrAccount: "a", kSecReturnRef: true, kSecReturnPersistentRef: true])
        #expect(status == errSecSuccess)
        let dictionary = try #require(result as? [String: Any])
        #expect(dictionary[kSecAttrLabel] as? String == "Label")
        #expect(dictionary[kSecValueData] as? Data == Data("s".utf8))
        #expect(dictionary[kSecValuePersistentRef] is Data)
        #expect(dictionary[kSecValueRef] == nil)

        var added: CFTypeRef?
        let item: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "b", kSecValueData: Data("t".utf8), kSecReturnRef: true]
        #expect(app.SecItemAdd(item, &added) == errSecSuccess)
        #expect(added == nil)

        let key: [String: Any] = [
            kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrApplicationTag: Data("k".utf8), kSecValueData: Data("key".utf8),
        ]
        #expect(app.SecItemAdd(key, nil) == errSecSuccess)
        var found: CFTypeRef?
        #expect(app.SecItemCopyMatching([kSecClass: kSecClassKey, kSecReturnRef: true], &found) == errSecUnimplemented)
        #expect(found == nil)

        // The item is opened for a ref, so a locked device refuses it as it refuses the data.
        try t.device.lock(immediately: true)
        #expect(copy([kSecAttrAccount: "a", kSecReturnRef: true]).0 == errSecInteractionNotAllowed)
    }

    @Test("errSecParam rules: both accessibility and access control, return keys in updates, class in updates")
    func paramRules() throws {
        let control = try AccessControl(protection: .whenUnlocked, flags: [.userPresence])
        #expect(add([kSecAttrAccount: "a", kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecAttrAccessControl: control]) == errSecParam)
        #expect(add([kSecAttrAccount: "a", kSecMatchLimit: kSecMatchLimitOne]) == errSecParam)
        #expect(add([kSecAttrAccount: "a", kSecAttrSynchronizable: kSecAttrSynchronizableAny]) == errSecParam)
        #expect(add([kSecAttrAccount: "sync", kSecAttrSynchronizable: true, kSecAttrAccessControl: control]) == errSecParam)
        #expect(add([kSecAttrAccount: "a"]) == errSecSuccess)
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]
        #expect(app.SecItemUpdate(query, [kSecReturnData: true]) == errSecParam)
        #expect(app.SecItemUpdate(query, [kSecMatchLimit: kSecMatchLimitAll]) == errSecParam)
        #expect(app.SecItemUpdate(query, [kSecClass: kSecClassGenericPassword]) == errSecParam)
        #expect(app.SecItemUpdate(query, [kSecAttrAccessControl: control]) == errSecParam)
        #expect(add([kSecAttrAccount: 42]) == errSecParam)
        var error: Unmanaged<CFError>?
        #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.biometryCurrentSet, .devicePasscode], &error) == nil)
        #expect(error?.takeRetainedValue().code == errSecParam)
        #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.biometryCurrentSet, .or, .devicePasscode], nil) != nil)
    }

    @Test("an update whose query asks for data or attributes is errSecParam; an empty update is not refused and touches the item")
    func updateRules() throws {
        #expect(add([kSecAttrAccount: "a", kSecValueData: Data("s".utf8)]) == errSecSuccess)
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]
        for returning in [kSecReturnData, kSecReturnAttributes] {
            var asking = query
            asking[returning] = true
            #expect(app.SecItemUpdate(asking, [kSecAttrLabel: "x"]) == errSecParam)
        }
        let before = try keychain.copy(ItemQuery(.genericPassword, attributes: [.account: .string("a")], returning: .attributes)).first!
        t.clock.advance(by: 1)
        #expect(app.SecItemUpdate(query, [:]) == errSecSuccess)
        let after = try keychain.copy(ItemQuery(.genericPassword, attributes: [.account: .string("a")], returning: [.attributes, .data])).first!
        #expect(after.modificationDate > before.modificationDate && after.attributes == before.attributes && after.data == Data("s".utf8))
        #expect(app.SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "none"], [:]) == errSecItemNotFound)
    }

    @Test("a persistent reference finds its item whether or not it is synchronizable, unless the query says otherwise")
    func persistentReferenceWithoutSynchronizableClause() throws {
        var added: CFTypeRef?
        #expect(
            app.SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "synced", kSecAttrSynchronizable: true,
                    kSecValueData: Data("s".utf8), kSecReturnPersistentRef: true,
                ], &added) == errSecSuccess)
        let reference = try #require(added as? Data)
        let (found, data) = copy([kSecValuePersistentRef: reference, kSecReturnData: true])
        #expect(found == errSecSuccess && data as? Data == Data("s".utf8))
        #expect(copy([kSecValuePersistentRef: reference, kSecAttrSynchronizable: false]).0 == errSecItemNotFound)
        #expect(copy([kSecAttrAccount: "synced"]).0 == errSecItemNotFound, "without a reference the implicit clause holds")
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: reference]) == errSecSuccess)
    }

    @Test("a persistent reference alone names its item: no kSecClass needed to read, update or delete by it")
    func persistentReferenceAlone() throws {
        var added: CFTypeRef?
        #expect(
            app.SecItemAdd(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "walked", kSecValueData: Data("s".utf8), kSecReturnPersistentRef: true],
                &added) == errSecSuccess)
        let reference = try #require(added as? Data)
        var result: CFTypeRef?
        #expect(app.SecItemCopyMatching([kSecValuePersistentRef: reference, kSecReturnData: true], &result) == errSecSuccess)
        #expect(result as? Data == Data("s".utf8))
        #expect(app.SecItemUpdate([kSecValuePersistentRef: reference], [kSecValueData: Data("t".utf8)]) == errSecSuccess)
        #expect(app.SecItemDelete([kSecValuePersistentRef: reference]) == errSecSuccess)
        #expect(app.SecItemCopyMatching([kSecValuePersistentRef: reference], nil) == errSecItemNotFound)
        // A reference that is not one still needs a class to mean anything.
        #expect(app.SecItemCopyMatching([kSecValuePersistentRef: Data("nonsense".utf8)], nil) == errSecParam)
    }

    @Test("a search, update or delete that names kSecAttrAccessControl is answered as without it, as Apple's is")
    func accessControlInAQuery() throws {
        let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, nil))
        #expect(add([kSecAttrAccount: "guarded", kSecAttrAccessControl: control, kSecValueData: Data("g".utf8)]) == errSecSuccess)
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded", kSecAttrAccessControl: control]
        var result: CFTypeRef?
        #expect(app.SecItemCopyMatching(query.merging([kSecReturnAttributes: true]) { $1 }, &result) == errSecSuccess)
        #expect((result as? [String: Any])?[kSecAttrAccount] as? String == "guarded")
        #expect(app.SecItemUpdate(query, [kSecAttrLabel: "seen"]) == errSecSuccess)
        #expect(app.SecItemDelete(query) == errSecSuccess)
        #expect(copy([kSecAttrAccount: "guarded"]).0 == errSecItemNotFound)
    }

    @Test("unknown attributes, missing and unknown classes")
    func classAndAttributeErrors() {
        #expect(add([kSecAttrServer: "example.com"]) == errSecNoSuchAttr, "generic passwords have no server")
        #expect(add([kSecAttrAccount: "a", "nonsense": 1]) == errSecNoSuchAttr)
        #expect(app.SecItemAdd([kSecAttrAccount: "a"], nil) == errSecParam)
        #expect(app.SecItemAdd([kSecClass: "nope", kSecAttrAccount: "a"], nil) == errSecNoSuchClass)
    }

    @Test("entitlements: default group, foreign groups, apps without a keychain entitlement")
    func entitlements() throws {
        #expect(add([kSecAttrAccount: "mine"]) == errSecSuccess)
        let widget = caller("com.example.widget")
        let other = caller("com.other.app")
        #expect(copy([kSecAttrAccount: "mine"], in: widget).0 == errSecSuccess, "the shared group is visible to both apps")
        #expect(copy([kSecAttrAccount: "mine"], in: other).0 == errSecItemNotFound, "other teams never see it")
        #expect(add([kSecAttrAccount: "x", kSecAttrAccessGroup: "\(TestDevice.teamID).shared"], in: other) == errSecMissingEntitlement)
        let unsigned = caller("com.unsigned.app")
        #expect(add([kSecAttrAccount: "x"], in: unsigned) == errSecMissingEntitlement)
        #expect(add([kSecAttrAccount: "own", kSecAttrAccessGroup: "\(TestDevice.teamID).\(TestDevice.appID)"]) == errSecSuccess)
        #expect(copy([kSecAttrAccount: "own"], in: widget).0 == errSecItemNotFound, "the app's own group is private to it")
    }

    @Test("an app transferred to another team loses every item in its old groups")
    func teamTransfer() throws {
        #expect(add([kSecAttrAccount: "token"]) == errSecSuccess)
        try t.device.install(AppManifest(bundleID: TestDevice.appID, teamID: "NEWTEAM123"))
        let transferred = caller(TestDevice.appID)
        #expect(copy([kSecAttrAccount: "token"], in: transferred).0 == errSecItemNotFound)
        #expect(add([kSecAttrAccount: "token"], in: transferred) == errSecSuccess, "the new team starts empty")
    }

    @Test("update changes primary-key attributes; a collision is errSecDuplicateItem and changes nothing")
    func primaryKeyUpdate() {
        #expect(add([kSecAttrAccount: "a", kSecValueData: Data("A".utf8)]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "b", kSecValueData: Data("B".utf8)]) == errSecSuccess)
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]
        #expect(app.SecItemUpdate(query, [kSecAttrAccount: "b"]) == errSecDuplicateItem)
        #expect(copy([kSecAttrAccount: "a", kSecReturnData: true]).1 as? Data == Data("A".utf8))
        #expect(app.SecItemUpdate(query, [kSecAttrAccount: "c", kSecValueData: Data("C".utf8)]) == errSecSuccess)
        #expect(copy([kSecAttrAccount: "c", kSecReturnData: true]).1 as? Data == Data("C".utf8))
        #expect(app.SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "zzz"], [kSecAttrLabel: "x"]) == errSecItemNotFound)
        // Updating every item to one primary key collides within the batch.
        #expect(app.SecItemUpdate([kSecClass: kSecClassGenericPassword], [kSecAttrAccount: "same"]) == errSecDuplicateItem)
    }

    @Test("modification dates strictly increase on every update, even within the same clock tick")
    func modificationDates() throws {
        try keychain.add(.password(account: "a"))
        var last = try keychain.copy(ItemQuery(.genericPassword, returning: .attributes)).first!.modificationDate
        for n in 0..<3 {
            try keychain.update(ItemQuery(.genericPassword), with: ItemChanges(attributes: [.label: .string("v\(n)")]))
            let now = try keychain.copy(ItemQuery(.genericPassword, returning: .attributes)).first!.modificationDate
            #expect(now > last)
            last = now
        }
    }

    @Test("add-or-update replaces the data of an existing item")
    func addOrUpdate() throws {
        try keychain.addOrUpdate(.password(account: "a", value: "one"))
        try keychain.addOrUpdate(.password(account: "a", value: "two"))
        #expect(try keychain.copy(.password(account: "a")).map(\.data) == [Data("two".utf8)])
    }

    @Test("authentication outcomes: match, no match, cancel, passcode, no prompt allowed")
    func authenticationOutcomes() throws {
        let control = try #require(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.biometryAny, .or, .devicePasscode], nil))
        #expect(add([kSecAttrAccount: "guarded", kSecAttrAccessControl: control, kSecValueData: Data("g".utf8)]) == errSecSuccess)
        func read(_ response: UserResponse?, extra: [String: Any] = [:]) -> OSStatus {
            if let response { app.context.userWill(response) }
            return copy([kSecAttrAccount: "guarded", kSecReturnData: true].merging(extra) { $1 }).0
        }
        #expect(read(.biometryMatch) == errSecSuccess)
        #expect(read(.passcode) == errSecSuccess)
        #expect(read(.typesPasscode("000000")) == errSecAuthFailed)
        #expect(read(.biometryNoMatch) == errSecAuthFailed)
        #expect(read(.cancel) == errSecUserCanceled)
        #expect(read(nil) == errSecSuccess, "with nothing queued, the user cooperates")
        let quiet = app.context.run { LAContext() }
        quiet.interactionNotAllowed = true
        #expect(read(nil, extra: [kSecUseAuthenticationContext: quiet]) == errSecInteractionNotAllowed)
        #expect(read(.biometryMatch, extra: [kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]) == errSecInteractionNotAllowed)
        // Attributes need no authentication.
        #expect(copy([kSecAttrAccount: "guarded", kSecReturnAttributes: true]).0 == errSecSuccess)
        // Update needs it; delete does not.
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded"]
        app.context.userWill(.cancel)
        #expect(app.SecItemUpdate(query, [kSecAttrLabel: "x"]) == errSecUserCanceled)
        #expect(app.SecItemDelete(query) == errSecSuccess)
    }

    @Test(
        "kSecUseAuthenticationUISkip leaves out the items whose secret needs a prompt, the match limit counting what is kept; kSecUseItemList is taken and unused, as by Apple's server"
    )
    func authenticationUISkip() throws {
        let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence], nil))
        #expect(add([kSecAttrAccount: "guarded", kSecAttrAccessControl: control, kSecValueData: Data("g".utf8)]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "plain", kSecValueData: Data("p".utf8)]) == errSecSuccess)
        let skip: [String: Any] = [kSecUseAuthenticationUI: kSecUseAuthenticationUISkip, kSecReturnData: true]
        let (all, found) = copy(skip.merging([kSecMatchLimit: kSecMatchLimitAll]) { $1 })
        #expect(all == errSecSuccess)
        #expect(found as? [Data] == [Data("p".utf8)])
        let (one, first) = copy(skip)
        #expect(one == errSecSuccess && first as? Data == Data("p".utf8), "the guarded item, added first, is passed over")
        #expect(copy(skip.merging([kSecAttrAccount: "guarded"]) { $1 }).0 == errSecItemNotFound)
        #expect(
            copy([kSecAttrAccount: "guarded", kSecReturnData: true, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]).0 == errSecInteractionNotAllowed)
        // Attributes need no prompt, so nothing is left out.
        let (_, attributes) = copy([kSecUseAuthenticationUI: kSecUseAuthenticationUISkip, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll])
        #expect((attributes as? [Any])?.count == 2)
        #expect(copy([kSecAttrAccount: "plain", kSecUseItemList: [Any]()]).0 == errSecSuccess)
    }

    @Test("biometry AND passcode needs both responses")
    func andCombinator() throws {
        let control = try AccessControl(protection: .whenUnlocked, expression: "biometryAny|and|devicePasscode")
        try keychain.add(NewItem(.genericPassword, attributes: [.account: .string("both")], accessControl: control))
        var query = ItemQuery(.genericPassword, attributes: [.account: .string("both")], returning: .data)
        query.authentication = .responding(.biometryMatch)
        #expect(status { _ = try keychain.copy(query) } == .authFailed)
        query.authentication = .responding(.biometryMatch, .passcode(TestDevice.defaultPasscode))
        #expect(status { _ = try keychain.copy(query) } == .success)
    }

    @Test("whenPasscodeSetThisDeviceOnly on a device without a passcode is errSecAuthFailed")
    func passcodeClassWithoutPasscode() throws {
        let bare = try TestDevice(passcode: nil)
        #expect(status { try bare.keychain().add(.password(account: "v", protection: .whenPasscodeSetThisDeviceOnly)) } == .authFailed)
    }

    @Test("deleting a synchronizable item leaves a tombstone that no search sees and an add replaces")
    func tombstones() throws {
        try keychain.add(.password(account: "s", synchronizable: true))
        try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("s")], synchronizable: .yes))
        #expect(status { _ = try keychain.copy(.password(account: "s", synchronizable: .yes)) } == .itemNotFound)
        let tombstones = try t.device.deviceKeychain.changes(since: 0).filter(\.isTombstone)
        #expect(tombstones.count == 1)
        #expect(tombstones.first?.record.attributes[.account] == .string("s"))
        try keychain.add(.password(account: "s", value: "again", synchronizable: true))
        #expect(try keychain.copy(.password(account: "s", synchronizable: .yes)).first?.data == Data("again".utf8))
        #expect(try t.device.deviceKeychain.changes(since: 0).filter(\.isTombstone).isEmpty)
    }

    @Test("delete succeeds while locked; class-A attribute queries fail while locked")
    func lockedBehaviour() throws {
        try keychain.add(.password(account: "a"))
        try keychain.add(.password(account: "d", protection: .always))
        try t.device.lock(immediately: true)
        #expect(copy([kSecAttrAccount: "a", kSecReturnAttributes: true]).0 == errSecInteractionNotAllowed)
        #expect(copy([kSecAttrAccount: "d", kSecReturnData: true]).0 == errSecSuccess)
        #expect(add([kSecAttrAccount: "new"]) == errSecInteractionNotAllowed)
        #expect(app.SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"], [kSecAttrLabel: "x"]) == errSecInteractionNotAllowed)
        #expect(app.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]) == errSecSuccess)
    }

    @Test("all four stored classes keep their own primary keys")
    func itemClassesAndPrimaryKeys() throws {
        var internet: [String: Any] = [
            kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "me",
            kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecAttrPort: 443,
        ]
        #expect(app.SecItemAdd(internet, nil) == errSecSuccess)
        #expect(app.SecItemAdd(internet, nil) == errSecDuplicateItem)
        internet[kSecAttrPort] = 8443
        #expect(app.SecItemAdd(internet, nil) == errSecSuccess, "the port is part of an internet password's key")
        internet[kSecAttrLabel] = "another label"
        #expect(app.SecItemAdd(internet, nil) == errSecDuplicateItem, "the label is not")
        let certificate: [String: Any] = [
            kSecClass: kSecClassCertificate, kSecAttrCertificateType: 3, kSecAttrIssuer: Data("CA".utf8),
            kSecAttrSerialNumber: Data([1]), kSecValueData: Data("DER".utf8),
        ]
        #expect(app.SecItemAdd(certificate, nil) == errSecSuccess)
        #expect(app.SecItemAdd(certificate, nil) == errSecDuplicateItem)
        let key: [String: Any] = [
            kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrApplicationTag: Data("com.example.key".utf8), kSecAttrKeySizeInBits: 256,
        ]
        #expect(app.SecItemAdd(key, nil) == errSecSuccess)
        #expect(app.SecItemAdd(key, nil) == errSecDuplicateItem)
        var result: CFTypeRef?
        #expect(app.SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecReturnAttributes: true], &result) == errSecSuccess)
        #expect((result as? [String: Any])?[kSecAttrAccessible] as? String == kSecAttrAccessibleAlways, "certificates default to class D")
    }

    @Test("an identity is a certificate whose public key hash names a private key")
    func identities() throws {
        let hash = Data("pkhash".utf8)
        try keychain.addIdentity(
            certificate: NewItem(.certificate, attributes: [.publicKeyHash: .data(hash), .label: .string("Me")], data: Data("DER".utf8)),
            privateKey: NewItem(.key, attributes: [.keyClass: .number(1), .applicationLabel: .data(hash)], data: Data("KEY".utf8)))
        var result: CFTypeRef?
        #expect(app.SecItemCopyMatching([kSecClass: kSecClassIdentity, kSecReturnAttributes: true, kSecReturnData: true], &result) == errSecSuccess)
        let identity = try #require(result as? [String: Any])
        #expect(identity[kSecClass] as? String == kSecClassIdentity)
        #expect(identity[kSecAttrLabel] as? String == "Me")
        #expect(identity[kSecValueData] as? Data == Data("DER".utf8))
        #expect(app.SecItemDelete([kSecClass: kSecClassIdentity]) == errSecSuccess)
        #expect(app.SecItemCopyMatching([kSecClass: kSecClassKey], nil) == errSecItemNotFound, "deleting the identity deletes its key")
    }

    @Test("a persistent reference survives a primary-key change")
    func persistentReferenceIsStable() throws {
        let record = try keychain.add(.password(account: "a"))
        try keychain.update(ItemQuery(.genericPassword), with: ItemChanges(attributes: [.account: .string("b")]))
        let found = try keychain.copy(ItemQuery(.genericPassword, persistentReference: record.persistentReference, returning: .attributes))
        #expect(found.first?.attributes[.account] == .string("b"))
        #expect(found.first?.persistentReference.data == record.persistentReference.data)
    }

    @Test("a device that is powered off answers errSecNotAvailable")
    func poweredOff() {
        t.device.powerOff()
        #expect(add([kSecAttrAccount: "a"]) == errSecNotAvailable)
    }
}

extension SecItemTests {
    @Test("add-or-update touches only the group the add went to")
    func addOrUpdateStaysInItsGroup() throws {
        let own = "\(TestDevice.teamID).\(TestDevice.appID)"
        try keychain.add(.password(account: "a", value: "own", accessGroup: own))
        try keychain.addOrUpdate(.password(account: "a", value: "shared-1"))
        try keychain.addOrUpdate(.password(account: "a", value: "shared-2"))
        var query = ItemQuery.password(account: "a")
        query.accessGroup = own
        #expect(try keychain.copy(query).first?.data == Data("own".utf8))
        query.accessGroup = "\(TestDevice.teamID).shared"
        #expect(try keychain.copy(query).first?.data == Data("shared-2".utf8))
    }
}

/// One app's Keychain Services calls, each made in its context as app code makes them.
struct SecCaller {
    let context: KeyferryContext

    init(_ t: TestDevice, _ bundleID: String) {
        context = KeyferryContext(device: t.device, app: bundleID, passcode: t.passcode)
    }

    func SecItemAdd(_ attributes: [String: Any], _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
        context.run { KeyferrySecurity.SecItemAdd(attributes as CFDictionary, result) }
    }

    func SecItemCopyMatching(_ query: [String: Any], _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
        context.run { KeyferrySecurity.SecItemCopyMatching(query as CFDictionary, result) }
    }

    func SecItemUpdate(_ query: [String: Any], _ changes: [String: Any]) -> OSStatus {
        context.run { KeyferrySecurity.SecItemUpdate(query as CFDictionary, changes as CFDictionary) }
    }

    func SecItemDelete(_ query: [String: Any]) -> OSStatus {
        context.run { KeyferrySecurity.SecItemDelete(query as CFDictionary) }
    }
}
