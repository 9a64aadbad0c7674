import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import Testing

@testable import Sync
@testable import SyncWire

/// The fixed inputs of the membership, key and joining vectors in Protocol/sync.md.
enum MembershipVector {
    static let creator = DeviceIdentity(
        signingSeed: try! SymmetricKey(bytes: [UInt8](repeating: 0x01, count: 32)), sealingSeed: try! SymmetricKey(bytes: [UInt8](repeating: 0x04, count: 32)))
    static let joiner = DeviceIdentity(
        signingSeed: try! SymmetricKey(bytes: [UInt8](repeating: 0x02, count: 32)), sealingSeed: try! SymmetricKey(bytes: [UInt8](repeating: 0x03, count: 32)))
    static let nonce = [UInt8](repeating: 0x07, count: 32)
    static var circle: UUID { CircleHistory.circleID(creator: creator.signingKey.publicKey, nonce: nonce) }
    static var create: MembershipEntry {
        MembershipEntry(.create, circle: circle, sequence: 0, previous: nonce, subject: creator.peer(named: "phone"), signer: creator.signingKey)
    }
    static var join: MembershipEntry {
        MembershipEntry(
            .join, circle: circle, sequence: 1, previous: ContentDigest.of(create.bytes), subject: joiner.peer(named: "tablet"), signer: creator.signingKey)
    }
    static var keys: CircleKeys { CircleKeys(circle: circle, epoch: 1, entropy: SeededEntropy(seed: 1)) }
    static var classKeys: PublishedClassKeys {
        PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(entropy: SeededEntropy(seed: 4)), signer: creator.signingKey)
    }
    static var request: JoinRequest {
        try! JoinRequest(circle: circle, name: "tablet", identity: joiner, made: Date(timeIntervalSince1970: 1_790_000_000), lifetime: 600)
    }
    static let codeDigits = "594850"

    /// A share as the creator sealed it to the joiner once: a sealed box is random, so the
    /// vector gives its bytes, and a reader checks its signature and opens it.
    static let share = try! CircleKeyShare(
        bytes: Hex.decode(
            "6b657966657272792e73796e632e73686172652e763159581b4053a58baa9a777f67bceae9b10100000075e270df2952c57ba8367ba8618c178f"
                + "9fe50db2799d304e74e918d9856861468a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c5000000024fdb5e8"
                + "fe3dbb2bf12d59f2f81cecc7fc0234073652e6fa8f0fa65335322b27d2f1fddbb69890fbb7d62e7888c9560a43b8d50cbb849c901f5a5dcb1b"
                + "4ca63f755858760b2ad0385c6ee5f2316694026c07d18a58de9c6c5ddd37f05b334d4b6633a46e31364d626e44f07363d683450d9cdb36a7bd"
                + "1458025ab4f4a595650a3420a4c8edfaba785cafbbe6c24bbd03")!)
    static var voucher: Voucher {
        Voucher(
            circle: circle, relay: URL(string: "https://relay.example:8443")!, head: ContentDigest.of(create.bytes), request: request.digest,
            entry: join, shares: [share], sponsor: creator.signingKey)
    }
    static var decline: JoinDecline { JoinDecline(circle: circle, request: request.digest, signer: creator.signingKey) }

    /// Every record of the vector, as Protocol/sync.md gives its bytes.
    static var records: [(name: String, bytes: [UInt8])] {
        [
            ("create", create.bytes), ("join", join.bytes), ("class keys", classKeys.bytes), ("share", share.bytes), ("request", request.bytes),
            ("voucher", voucher.bytes), ("decline", decline.bytes),
        ]
    }
}

private func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }

@Suite("Membership, key and joining vectors")
struct MembershipVectorTests {
    @Test("the vectors read back, verify, and open: the history, the class keys under the circle key, the share for the joiner")
    func vectorsVerify() throws {
        let history = try CircleHistory(verifying: [MembershipVector.create, MembershipVector.join])
        #expect(history.circle == UUID(uuidString: "59581B40-53A5-8BAA-9A77-7F67BCEAE9B1"))
        #expect(history.members.count == 2)
        let creator = MembershipVector.creator.signingKey.publicKey
        let published = try PublishedClassKeys(bytes: MembershipVector.classKeys.bytes)
        #expect(published.isSigned(by: creator, circle: history.circle))
        let keys = MembershipVector.keys
        let opened = try CircleKeys(circle: history.circle, epoch: 1, circleKey: keys.circleKey, wrappedClassKeys: published.wrapped)
        #expect(opened.classKey(.a) == keys.classKey(.a) && opened.classKey(.c) == keys.classKey(.c))
        #expect(MembershipVector.share.isSigned(by: creator, circle: history.circle))
        #expect(try MembershipVector.share.open(with: MembershipVector.joiner.sealingKey, trusting: [creator]) == keys.circleKey)
        #expect(try JoinRequest(bytes: MembershipVector.request.bytes) == MembershipVector.request)
        #expect(MembershipVector.request.code.description == "\(MembershipVector.codeDigits.prefix(3)) \(MembershipVector.codeDigits.suffix(3))")
        let voucher = try Voucher(bytes: MembershipVector.voucher.bytes)
        #expect(voucher == MembershipVector.voucher && voucher.isSignedBySponsor)
        #expect(try JoinDecline(bytes: MembershipVector.decline.bytes).isSigned)
    }

    @Test("Protocol/sync.md gives every vector's bytes, and the code, as this build makes them")
    func documented() throws {
        let page = try String(contentsOf: OutsideReaders.packageRoot.appendingPathComponent("Protocol/sync.md"), encoding: .utf8)
        let packed = page.filter { !$0.isWhitespace }
        for (name, bytes) in MembershipVector.records {
            let given = packed.contains(hex(bytes))
            #expect(given, "sync.md lacks the \(name) vector's bytes: \(hex(bytes))")
        }
        let code = page.contains("code `\(MembershipVector.codeDigits.prefix(3)) \(MembershipVector.codeDigits.suffix(3))`")
        #expect(code, "sync.md gives the request's code")
    }

    /// Builds the vectors from their inputs with PyNaCl (libsodium's Ed25519, X25519 sealed
    /// boxes and XChaCha20-Poly1305) and hashlib, following Protocol/sync.md alone.
    static let independentBuilder = #"""
        import hashlib, struct, sys, uuid
        from nacl.bindings import (crypto_aead_xchacha20poly1305_ietf_encrypt as seal, crypto_sign_seed_keypair, crypto_sign,
            crypto_sign_open, crypto_box_seed_keypair, crypto_box_seal_open)
        circle_key, class_a, class_c, nonce_a, nonce_c, share = (bytes.fromhex(a) for a in sys.argv[1:7])
        u32 = lambda v: struct.pack("<I", v)
        u64 = lambda v: struct.pack("<Q", v)
        lp = lambda b: u32(len(b)) + b
        s = lambda t: lp(t.encode())
        b2 = lambda b: hashlib.blake2b(b, digest_size=32).digest()
        sign = lambda message, secret: message + crypto_sign(message, secret)[:64]
        creator, creator_secret = crypto_sign_seed_keypair(b"\x01" * 32)
        creator_box, _ = crypto_box_seed_keypair(b"\x04" * 32)
        joiner, joiner_secret = crypto_sign_seed_keypair(b"\x02" * 32)
        joiner_box, joiner_box_secret = crypto_box_seed_keypair(b"\x03" * 32)
        nonce = b"\x07" * 32
        circle = bytearray(b2(b"keyferry.sync.circle.v2" + creator + nonce)[:16])
        circle[6] = circle[6] & 0x0F | 0x80
        circle[8] = circle[8] & 0x3F | 0x80
        circle = bytes(circle)
        entry = lambda sequence, previous, kind, name, signing, box: sign(
            b"\x02" + circle + u32(sequence) + previous + bytes([kind]) + s(name) + signing + box + creator, creator_secret)
        create = entry(0, nonce, 1, "phone", creator, creator_box)
        join = entry(1, b2(create), 2, "tablet", joiner, joiner_box)
        ad = lambda sync_class: b"keyferry.sync.classkey.v1" + circle + u32(1) + bytes([sync_class])
        wrapped = nonce_a + seal(class_a, ad(0x41), nonce_a, circle_key) + nonce_c + seal(class_c, ad(0x43), nonce_c, circle_key)
        class_keys = sign(b"keyferry.sync.classkeys.v2" + circle + u32(1) + lp(wrapped) + creator, creator_secret)
        # The share: signed by the creator over everything before its last 64 bytes; its sealed key opens for the joiner.
        signed, signature = share[:-64], share[-64:]
        assert crypto_sign_open(signature + signed, creator) == signed
        head = b"keyferry.sync.share.v1" + circle + u32(1) + joiner_box + creator
        assert signed[:len(head)] == head and struct.unpack("<I", signed[len(head):len(head) + 4])[0] == 80 == len(signed) - len(head) - 4
        opened = crypto_box_seal_open(signed[len(head) + 4:], joiner_box, joiner_box_secret)
        made = 1790000000000
        request = sign(b"KFJR\x01" + circle + s("tablet") + joiner + joiner_box + u64(made) + u64(made + 600000), joiner_secret)
        code = "%06d" % (struct.unpack("<Q", b2(b"keyferry.sync.code.v1" + joiner + joiner_box)[:8])[0] % 1000000)
        voucher = sign(b"KFVO\x01" + circle + s("https://relay.example:8443") + b2(create) + b2(request) + lp(join) + u32(1) + lp(share)
            + creator, creator_secret)
        decline = sign(b"KFJD\x01" + circle + b2(request) + creator, creator_secret)
        print(str(uuid.UUID(bytes=circle)).upper(), create.hex(), join.hex(), class_keys.hex(), "opens" if opened == circle_key else "differs",
            request.hex(), code, voucher.hex(), decline.hex())
        """#

    @Test(
        "an independent implementation (PyNaCl, hashlib) builds the membership, class-key, request, voucher and decline vectors byte for byte, and opens the share"
    )
    func independentVectors() throws {
        let keys = MembershipVector.keys
        let nonces = SeededEntropy(seed: 4)
        let inputs = [
            keys.circleKey.exportedBytes, keys.classKey(.a).exportedBytes, keys.classKey(.c).exportedBytes, nonces.bytes(24), nonces.bytes(24),
            MembershipVector.share.bytes,
        ]
        let words = try OutsideReaders.pythonWords(Self.independentBuilder, inputs.map(hex))
        try #require(words.count == 9, "the independent builder printed \(words.count) words")
        let v = MembershipVector.self
        #expect(words[0] == v.circle.uuidString)
        #expect(words[1] == hex(v.create.bytes))
        #expect(words[2] == hex(v.join.bytes))
        #expect(words[3] == hex(v.classKeys.bytes))
        #expect(words[4] == "opens", "the share's signature holds and its sealed key opens to the circle key")
        #expect(words[5] == hex(v.request.bytes))
        #expect(words[6] == v.codeDigits)
        #expect(words[7] == hex(v.voucher.bytes))
        #expect(words[8] == hex(v.decline.bytes))
    }
}
