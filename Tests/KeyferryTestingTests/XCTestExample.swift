import Foundation
import KeyferryTesting
import XCTest

/// KeyferryTesting from an XCTest case: the same device, the same assertions by throwing.
final class TokenStoreXCTests: XCTestCase {
    var phone: SimulatedDevice!
    var app: KeyferryContext!

    override func setUpWithError() throws {
        phone = try SimulatedDevice()
        app = try phone.install("com.example.notes")
    }

    override func tearDown() {
        phone = nil
        app = nil
    }

    func testWhenUnlockedTokenIsUnreadableWhileLocked() throws {
        let store = CredentialStore(service: "com.example.notes")
        try app.run { try store.save(Data("t0k3n".utf8), account: "me", accessibility: kSecAttrAccessibleWhenUnlocked) }
        try phone.lock()
        try app.run {
            XCTAssertThrowsError(try store.read(account: "me")) { error in
                XCTAssertEqual(error as? CredentialStoreError, .unhandled(errSecInteractionNotAllowed))
            }
        }
        try phone.unlock()
        XCTAssertEqual(try app.run { try store.read(account: "me") }, Data("t0k3n".utf8))
        try phone.requireNoTraps()
    }
}
