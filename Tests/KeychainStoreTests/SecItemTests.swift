import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

/// Apple's SecItem semantics, exercised through the dictionary API as app code would call it.
@Suite("SecItem semantics")
struct SecItemTests {
    let t: TestDevice
    let keychain: Keychain

    init() throws {
        t = try TestDevice(biometry: true, apps: [
            AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID, accessGroups: ["\(TestDevice.teamID).shared"]),
            AppManifest(bundleID: "com.example.widget", teamID: TestDevice.teamID, accessGroups: ["\(TestDevice.teamID).shared"]),
            AppManifest(bundleID: "com.other.app", teamID: "ZYXWV98765"),
            AppManifest(bundleID: "com.unsigned.app", teamID: "ZYXWV98765", hasKeychainEntitlement: false),
        ])
        keychain = try t.keychain()
    }

    func add(_ attributes: [String: Any], in keychain: Keychain? = nil) -> OSStatus {
        var base: [String: Any] = [kSecClass: kSecClassGenericPassword]
        base.merge(attributes) { $1 }
        return (keychain ?? self.keychain).SecItemAdd(base, nil)
    }

    func copy(_ query: [String: Any], in keychain: Keychain? = nil) -> (OSStatus, Any?) {
        var base: [String: Any] = [kSecClass: kSecClassGenericPassword]
        base.merge(query) { $1 }
        var result: Any?
        let status = (keychain ?? self.keychain).SecItemCopyMatching(base, &result)
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

    @Test("an under-specified delete removes every match; a match limit on delete is errSecParam")
    func deleteTouchesAll() {
        #expect(add([kSecAttrAccount: "a"]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "b"]) == errSecSuccess)
        #expect(keychain.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitOne]) == errSecParam)
        #expect(keychain.SecItemDelete([kSecClass: kSecClassGenericPassword]) == errSecSuccess)
        #expect(copy([:]).0 == errSecItemNotFound)
        #expect(keychain.SecItemDelete([kSecClass: kSecClassGenericPassword]) == errSecItemNotFound)
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
        var added: Any?
        let status = keychain.SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecAttrLabel: "Label",
                                          kSecValueData: Data("s".utf8), kSecReturnPersistentRef: true], &added)
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
        #expect(copy([kSecReturnRef: true]).0 == errSecUnimplemented)
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
        #expect(keychain.SecItemUpdate(query, [kSecReturnData: true]) == errSecParam)
        #expect(keychain.SecItemUpdate(query, [kSecMatchLimit: kSecMatchLimitAll]) == errSecParam)
        #expect(keychain.SecItemUpdate(query, [kSecClass: kSecClassGenericPassword]) == errSecParam)
        #expect(keychain.SecItemUpdate(query, [kSecAttrAccessControl: control]) == errSecParam)
        #expect(add([kSecAttrAccount: 42]) == errSecParam)
        var error: KeychainError?
        #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.biometryCurrentSet, .devicePasscode], &error) == nil)
        #expect(error?.status == .param)
        #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.biometryCurrentSet, .or, .devicePasscode], nil) != nil)
    }

    @Test("an update whose query asks for data or attributes is errSecParam; an empty update is not refused and touches the item")
    func updateRules() throws {
        #expect(add([kSecAttrAccount: "a", kSecValueData: Data("s".utf8)]) == errSecSuccess)
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]
        for returning in [kSecReturnData, kSecReturnAttributes] {
            var asking = query
            asking[returning] = true
            #expect(keychain.SecItemUpdate(asking, [kSecAttrLabel: "x"]) == errSecParam)
        }
        let before = try keychain.copy(ItemQuery(.genericPassword, attributes: [.account: .string("a")], returning: .attributes)).first!
        t.clock.advance(by: 1)
        #expect(keychain.SecItemUpdate(query, [:]) == errSecSuccess)
        let after = try keychain.copy(ItemQuery(.genericPassword, attributes: [.account: .string("a")], returning: [.attributes, .data])).first!
        #expect(after.modificationDate > before.modificationDate && after.attributes == before.attributes && after.data == Data("s".utf8))
        #expect(keychain.SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "none"], [:]) == errSecItemNotFound)
    }

    @Test("a persistent reference finds its item whether or not it is synchronizable, unless the query says otherwise")
    func persistentReferenceWithoutSynchronizableClause() throws {
        var added: Any?
        #expect(keychain.SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "synced", kSecAttrSynchronizable: true,
                                     kSecValueData: Data("s".utf8), kSecReturnPersistentRef: true], &added) == errSecSuccess)
        let reference = try #require(added as? Data)
        let (found, data) = copy([kSecValuePersistentRef: reference, kSecReturnData: true])
        #expect(found == errSecSuccess && data as? Data == Data("s".utf8))
        #expect(copy([kSecValuePersistentRef: reference, kSecAttrSynchronizable: false]).0 == errSecItemNotFound)
        #expect(copy([kSecAttrAccount: "synced"]).0 == errSecItemNotFound, "without a reference the implicit clause holds")
        #expect(keychain.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: reference]) == errSecSuccess)
    }

    @Test("unknown attributes, missing and unknown classes")
    func classAndAttributeErrors() {
        #expect(add([kSecAttrServer: "example.com"]) == errSecNoSuchAttr, "generic passwords have no server")
        #expect(add([kSecAttrAccount: "a", "nonsense": 1]) == errSecNoSuchAttr)
        #expect(keychain.SecItemAdd([kSecAttrAccount: "a"], nil) == errSecParam)
        #expect(keychain.SecItemAdd([kSecClass: "nope", kSecAttrAccount: "a"], nil) == errSecNoSuchClass)
    }

    @Test("entitlements: default group, foreign groups, apps without a keychain entitlement")
    func entitlements() throws {
        #expect(add([kSecAttrAccount: "mine"]) == errSecSuccess)
        let widget = try t.device.keychain(for: "com.example.widget")
        let other = try t.device.keychain(for: "com.other.app")
        #expect(copy([kSecAttrAccount: "mine"], in: widget).0 == errSecSuccess, "the shared group is visible to both apps")
        #expect(copy([kSecAttrAccount: "mine"], in: other).0 == errSecItemNotFound, "other teams never see it")
        #expect(add([kSecAttrAccount: "x", kSecAttrAccessGroup: "\(TestDevice.teamID).shared"], in: other) == errSecMissingEntitlement)
        let unsigned = try t.device.keychain(for: "com.unsigned.app")
        #expect(add([kSecAttrAccount: "x"], in: unsigned) == errSecMissingEntitlement)
        #expect(add([kSecAttrAccount: "own", kSecAttrAccessGroup: "\(TestDevice.teamID).\(TestDevice.appID)"]) == errSecSuccess)
        #expect(copy([kSecAttrAccount: "own"], in: widget).0 == errSecItemNotFound, "the app's own group is private to it")
    }

    @Test("an app transferred to another team loses every item in its old groups")
    func teamTransfer() throws {
        #expect(add([kSecAttrAccount: "token"]) == errSecSuccess)
        try t.device.install(AppManifest(bundleID: TestDevice.appID, teamID: "NEWTEAM123"))
        let transferred = try t.device.keychain(for: TestDevice.appID)
        #expect(copy([kSecAttrAccount: "token"], in: transferred).0 == errSecItemNotFound)
        #expect(add([kSecAttrAccount: "token"], in: transferred) == errSecSuccess, "the new team starts empty")
    }

    @Test("update changes primary-key attributes; a collision is errSecDuplicateItem and changes nothing")
    func primaryKeyUpdate() {
        #expect(add([kSecAttrAccount: "a", kSecValueData: Data("A".utf8)]) == errSecSuccess)
        #expect(add([kSecAttrAccount: "b", kSecValueData: Data("B".utf8)]) == errSecSuccess)
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]
        #expect(keychain.SecItemUpdate(query, [kSecAttrAccount: "b"]) == errSecDuplicateItem)
        #expect(copy([kSecAttrAccount: "a", kSecReturnData: true]).1 as? Data == Data("A".utf8))
        #expect(keychain.SecItemUpdate(query, [kSecAttrAccount: "c", kSecValueData: Data("C".utf8)]) == errSecSuccess)
        #expect(copy([kSecAttrAccount: "c", kSecReturnData: true]).1 as? Data == Data("C".utf8))
        #expect(keychain.SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "zzz"], [kSecAttrLabel: "x"]) == errSecItemNotFound)
        // Updating every item to one primary key collides within the batch.
        #expect(keychain.SecItemUpdate([kSecClass: kSecClassGenericPassword], [kSecAttrAccount: "same"]) == errSecDuplicateItem)
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
        let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.biometryAny, .or, .devicePasscode], nil))
        #expect(add([kSecAttrAccount: "guarded", kSecAttrAccessControl: control, kSecValueData: Data("g".utf8)]) == errSecSuccess)
        func read(_ context: AuthenticationContext?) -> OSStatus {
            var query: [String: Any] = [kSecAttrAccount: "guarded", kSecReturnData: true]
            if let context { query[kSecUseAuthenticationContext] = context }
            return copy(query).0
        }
        #expect(read(.responding(.biometryMatch)) == errSecSuccess)
        #expect(read(.responding(.passcode(TestDevice.defaultPasscode))) == errSecSuccess)
        #expect(read(.responding(.passcode("000000"))) == errSecAuthFailed)
        #expect(read(.responding(.biometryNoMatch)) == errSecAuthFailed)
        #expect(read(.responding(.cancel)) == errSecUserCanceled)
        #expect(read(nil) == errSecInteractionNotAllowed)
        #expect(copy([kSecAttrAccount: "guarded", kSecReturnData: true, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail,
                      kSecUseAuthenticationContext: AuthenticationContext.responding(.biometryMatch)]).0 == errSecInteractionNotAllowed)
        // Attributes need no authentication.
        #expect(copy([kSecAttrAccount: "guarded", kSecReturnAttributes: true]).0 == errSecSuccess)
        // Update needs it; delete does not.
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded"]
        #expect(keychain.SecItemUpdate(query, [kSecAttrLabel: "x"]) == errSecInteractionNotAllowed)
        #expect(keychain.SecItemDelete(query) == errSecSuccess)
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
        #expect(keychain.SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"], [kSecAttrLabel: "x"]) == errSecInteractionNotAllowed)
        #expect(keychain.SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]) == errSecSuccess)
    }

    @Test("all four stored classes keep their own primary keys")
    func itemClassesAndPrimaryKeys() throws {
        var internet: [String: Any] = [kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "me",
                                       kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecAttrPort: 443]
        #expect(keychain.SecItemAdd(internet, nil) == errSecSuccess)
        #expect(keychain.SecItemAdd(internet, nil) == errSecDuplicateItem)
        internet[kSecAttrPort] = 8443
        #expect(keychain.SecItemAdd(internet, nil) == errSecSuccess, "the port is part of an internet password's key")
        internet[kSecAttrLabel] = "another label"
        #expect(keychain.SecItemAdd(internet, nil) == errSecDuplicateItem, "the label is not")
        let certificate: [String: Any] = [kSecClass: kSecClassCertificate, kSecAttrCertificateType: 3, kSecAttrIssuer: Data("CA".utf8),
                                          kSecAttrSerialNumber: Data([1]), kSecValueData: Data("DER".utf8)]
        #expect(keychain.SecItemAdd(certificate, nil) == errSecSuccess)
        #expect(keychain.SecItemAdd(certificate, nil) == errSecDuplicateItem)
        let key: [String: Any] = [kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                                  kSecAttrApplicationTag: Data("com.example.key".utf8), kSecAttrKeySizeInBits: 256]
        #expect(keychain.SecItemAdd(key, nil) == errSecSuccess)
        #expect(keychain.SecItemAdd(key, nil) == errSecDuplicateItem)
        var result: Any?
        #expect(keychain.SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecReturnAttributes: true], &result) == errSecSuccess)
        #expect((result as? [String: Any])?[kSecAttrAccessible] as? String == kSecAttrAccessibleAlways, "certificates default to class D")
    }

    @Test("an identity is a certificate whose public key hash names a private key")
    func identities() throws {
        let hash = Data("pkhash".utf8)
        try keychain.addIdentity(
            certificate: NewItem(.certificate, attributes: [.publicKeyHash: .data(hash), .label: .string("Me")], data: Data("DER".utf8)),
            privateKey: NewItem(.key, attributes: [.keyClass: .number(1), .applicationLabel: .data(hash)], data: Data("KEY".utf8)))
        var result: Any?
        #expect(keychain.SecItemCopyMatching([kSecClass: kSecClassIdentity, kSecReturnAttributes: true, kSecReturnData: true], &result) == errSecSuccess)
        let identity = try #require(result as? [String: Any])
        #expect(identity[kSecClass] as? String == kSecClassIdentity)
        #expect(identity[kSecAttrLabel] as? String == "Me")
        #expect(identity[kSecValueData] as? Data == Data("DER".utf8))
        #expect(keychain.SecItemDelete([kSecClass: kSecClassIdentity]) == errSecSuccess)
        #expect(keychain.SecItemCopyMatching([kSecClass: kSecClassKey], nil) == errSecItemNotFound, "deleting the identity deletes its key")
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
