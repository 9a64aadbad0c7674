import Foundation
import KeychainModel
import Testing

@Suite("Keychain model")
struct ModelTests {
    @Test("UUIDs sort by their bytes exactly as by their text, Foundation's uppercase uuidString")
    func uuidTextOrder() {
        // Random ones, and ones that differ only where digits meet letters (9 against A) or
        // only in their last byte.
        var uuids = (0..<200).map { _ in UUID() }
        uuids += [
            "00000000-0000-0000-0000-000000000009", "00000000-0000-0000-0000-00000000000A", "90000000-0000-0000-0000-000000000000",
            "A0000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFE", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
        ].map { UUID(uuidString: $0)! }
        #expect(uuids.sorted { $0.precedesInTextOrder($1) } == uuids.sorted { $0.uuidString < $1.uuidString })
        #expect(!uuids[0].precedesInTextOrder(uuids[0]))
    }

    @Test("protection classes carry Apple's codes and rules")
    func protectionClasses() {
        #expect(ProtectionClass.allCases.map(\.rawValue) == ["ak", "ck", "dk", "aku", "cku", "dku", "akpu"])
        #expect(ProtectionClass.allCases.filter(\.isThisDeviceOnly).count == 4)
        #expect(ProtectionClass(name: "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly") == .afterFirstUnlockThisDeviceOnly)
        #expect(ProtectionClass(name: "whenUnlocked") == .whenUnlocked)
        #expect(ProtectionClass(name: "akpu") == .whenPasscodeSetThisDeviceOnly)
        #expect(ProtectionClass(name: "sometimes") == nil)
        #expect(!ProtectionClass.always.isPasscodeProtected)
        #expect(ItemClass.certificate.defaultProtection == .always)
        #expect(ItemClass.genericPassword.defaultProtection == .whenUnlocked)
    }

    @Test("status codes print as errSecName (code)")
    func statuses() {
        #expect(KeychainStatus.itemNotFound.description == "errSecItemNotFound (-25300)")
        #expect(KeychainError(.interactionNotAllowed, "locked.").description == "errSecInteractionNotAllowed (-25308): locked.")
        #expect(KeychainStatus(rawValue: -34018).name == "errSecMissingEntitlement")
    }

    @Test("access control needs or/and between two constraints, and not both")
    func accessControlRules() throws {
        #expect(throws: KeychainError.self) { try AccessControl(protection: .whenUnlocked, flags: [.biometryAny, .devicePasscode]) }
        #expect(throws: KeychainError.self) { try AccessControl(protection: .whenUnlocked, flags: [.biometryAny, .or, .and, .devicePasscode]) }
        #expect(throws: KeychainError.self) { try AccessControl(protection: .whenUnlocked, expression: "biometryAny|maybe|devicePasscode") }
        let control = try AccessControl(protection: .whenUnlocked, expression: "biometryCurrentSet|or|devicePasscode")
        #expect(control.flags == [.biometryCurrentSet, .or, .devicePasscode])
        #expect(control.expression == "biometryCurrentSet|or|devicePasscode")
        #expect(try AccessControl(protection: .always, flags: [.privateKeyUsage]).requiresAuthentication == false)
    }

    @Test(
        "constraint evaluation follows the user's responses",
        arguments: [
            ("userPresence", [AuthenticationResponse.biometryMatch], true, KeychainStatus.success),
            ("userPresence", [.passcode("1234")], false, .success),
            ("userPresence", [.passcode("9999")], true, .authFailed),
            ("biometryAny", [.passcode("1234")], true, .authFailed),
            ("biometryAny", [.biometryMatch], false, .authFailed),
            ("biometryAny", [.biometryNoMatch], true, .authFailed),
            ("biometryAny", [.cancel], true, .userCanceled),
            ("devicePasscode", [], true, .interactionNotAllowed),
            ("biometryAny|and|devicePasscode", [.biometryMatch, .passcode("1234")], true, .success),
            ("biometryAny|and|devicePasscode", [.passcode("1234")], true, .authFailed),
        ])
    func evaluation(expression: String, responses: [AuthenticationResponse], enrolled: Bool, expected: KeychainStatus) throws {
        let control = try AccessControl(protection: .whenUnlocked, expression: expression)
        let facts = AuthenticationFacts(biometryEnrolled: enrolled, biometryUnchangedSinceItemWasAdded: true, isCorrectPasscode: { $0 == "1234" })
        let outcome = control.evaluate(AuthenticationContext(responses: responses), facts: facts)
        #expect((outcome?.status ?? .success) == expected)
    }

    @Test("after re-enrolment, a biometryCurrentSet item is gone for biometry; one with a passcode alternative says the passcode still opens it")
    func reenrolment() throws {
        let facts = AuthenticationFacts(biometryEnrolled: true, biometryUnchangedSinceItemWasAdded: false, isCorrectPasscode: { $0 == "1234" })
        let alone = try AccessControl(protection: .whenUnlocked, expression: "biometryCurrentSet")
        let aloneError = try #require(alone.evaluate(AuthenticationContext(responses: [.biometryMatch]), facts: facts))
        #expect(aloneError.message.contains("Delete it"))
        let withPasscode = try AccessControl(protection: .whenUnlocked, expression: "biometryCurrentSet|or|devicePasscode")
        let error = try #require(withPasscode.evaluate(AuthenticationContext(responses: [.biometryMatch]), facts: facts))
        #expect(error.status == .authFailed)
        #expect(error.message.contains("still opens with the device passcode") && !error.message.contains("Delete it"), "\(error.message)")
        #expect(withPasscode.evaluate(AuthenticationContext(responses: [.passcode("1234")]), facts: facts) == nil)
    }

    @Test("an attribute is named as Apple names it, with or without kSecAttr, or by its short code; keyType is Apple's name for type")
    func attributeNames() {
        for name in ["keyType", "kSecAttrKeyType", "type", "KeyType"] { #expect(AttributeKey(name: name) == .type, "\(name)") }
        for name in ["applicationTag", "kSecAttrApplicationTag", "atag"] { #expect(AttributeKey(name: name) == .applicationTag, "\(name)") }
        #expect(AttributeKey(name: "keyKind") == nil)
    }

    @Test("persistent references round-trip and reject foreign bytes")
    func persistentReferences() throws {
        let reference = PersistentReference(itemClass: .internetPassword, uuid: UUID())
        #expect(try PersistentReference(data: reference.data) == reference)
        #expect(throws: KeychainError.self) { try PersistentReference(data: Data("garbage".utf8)) }
    }

    @Test("primary keys ignore accessibility and label, and default missing attributes")
    func primaryKeys() {
        let a = PrimaryKey(
            itemClass: .genericPassword, accessGroup: "g", synchronizable: false,
            attributes: [.account: .string("x"), .label: .string("one")])
        let b = PrimaryKey(
            itemClass: .genericPassword, accessGroup: "g", synchronizable: false,
            attributes: [.account: .string("x"), .service: .string(""), .label: .string("two")])
        #expect(a == b)
        #expect(a.canonicalBytes == b.canonicalBytes)
        let synced = PrimaryKey(itemClass: .genericPassword, accessGroup: "g", synchronizable: true, attributes: [.account: .string("x")])
        #expect(a.canonicalBytes != synced.canonicalBytes)
    }

    @Test("byte coding: UUIDs spelled as Foundation spells them, attributes picked out undecoded, hex both ways, UTF-8 checked")
    func byteCoding() throws {
        var uuids = [
            UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)),
        ]
        for _ in 0..<200 { uuids.append(UUID()) }
        for uuid in uuids {
            var w = ByteWriter()
            w.uuidText(uuid)
            #expect(String(decoding: w.bytes, as: UTF8.self) == uuid.uuidString)
        }

        let attributes: Attributes = [.account: .string("alice"), .service: .data(Data("imap".utf8)), .port: .number(993), .label: .string("")]
        var w = ByteWriter()
        w.attributes(attributes)
        var r = ByteReader(w.bytes)
        let encoded = try r.encodedAttributes()
        #expect(try encoded.decoded() == attributes)
        let picked = try encoded.values(of: AttributeSelection([.label, .server, .account, .service]))
        #expect(picked[.account] == .string("alice"))
        #expect(picked[.service] == .data(Data("imap".utf8)))
        #expect(picked[.label] == .string(""))
        #expect(picked[.server] == nil)
        #expect(picked[.port] == nil, "not selected")
        var truncated = ByteReader(Array(w.bytes.dropLast()))
        #expect(throws: ByteReader.Malformed.self) { try truncated.encodedAttributes() }

        #expect(Hex.encode([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
        #expect(Hex.decode("000FA5ff") == [0x00, 0x0f, 0xa5, 0xff])
        #expect(Hex.decode("") == [])
        for bad in ["0", "0g", "zz", "12 3"] { #expect(Hex.decode(bad) == nil, "\(bad)") }

        // Invalid UTF-8 of every kind, including a truncated sequence that repairs to as many
        // bytes as it had (F0 90 80 becomes one U+FFFD), an encoded surrogate and an overlong form.
        for invalid: [UInt8] in [[0x61, 0xFF, 0x62], [0xF0, 0x90, 0x80, 0x41], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xE2, 0x82]] {
            var bad = ByteWriter()
            bad.lengthPrefixed(invalid)
            var badReader = ByteReader(bad.bytes)
            #expect(throws: ByteReader.Malformed.self, "\(invalid)") { try badReader.string() }
        }
        var replacement = ByteWriter()
        replacement.string("\u{FFFD}")
        var replacementReader = ByteReader(replacement.bytes)
        #expect(try replacementReader.string() == "\u{FFFD}", "a U+FFFD that was sent is valid")
        var good = ByteWriter()
        good.string("caf\u{E9} \u{1F511}")
        var goodReader = ByteReader(Array([9, 9] + good.bytes)[2...])
        #expect(try goodReader.string() == "caf\u{E9} \u{1F511}")
    }
}

@Suite("Text from outside")
struct ControlCharacterTests {
    @Test("control characters are escaped, so a name or a refusal cannot forge a log line or rewrite the terminal; other text is kept as it is")
    func escaped() {
        #expect("phone\nINFO forged line".escapingControlCharacters == "phone\\u{A}INFO forged line")
        #expect("\u{1B}[2Jcleared".escapingControlCharacters == "\\u{1B}[2Jcleared")
        #expect("Alice's iPhone – 📱 é".escapingControlCharacters == "Alice's iPhone – 📱 é")
    }
}
