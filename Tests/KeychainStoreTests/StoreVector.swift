/// Expected bytes of the Protocol/store.md vector (hex). They were reproduced independently
/// from the document alone (BLAKE2b and XChaCha20-Poly1305 from other libraries; format 3's
/// metadata with PyNaCl 1.6.2).
enum StoreVector {
    static let expected: [String: String] = [
        "uidWrappingKey": "f7c687541ab1d3790bcfaeb56988802520d348f43f6de16ba6e43543310937d5",
        "passcodeTangleKey": "b6cd2d371478d72dbf23c17c570c1ea755dd074a68b801f6d62179e8e1cf50df",
        "indexKey": "0319b89e8e98a4cb975fdd7b17eb7e585dd5c991f5882744849f4f6d91fbe6d0",
        "wrappedClassKey":
            "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7e34a923f5f5bbeed87cb4043022d22626f1e6a1f096da47239351354bd0f53dcf2885c1229993446d3e7805df517b686",
        "accessGroupHash": "113a9c5788de0c949173c5292642c051",
        "primaryKeyHash": "0fe2937ee2384d3f746cf4ec85d3de37e7910429ca0bb3e0f55ff35043367332",
        "tokens": "5f79bb97494963e4f409621c46c912fdb6d1e1885d6565352c94943edfdcc6d2",
        "metadataPlaintext":
            "011a000000414243444531323334352e636f6d2e6578616d706c652e6170700000000084d7c7410000000084d7c74100000000000200000004000000616363740600000001616c696365040000007376636505000000016d61696c",
        "wrappedItemKey":
            "98999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeaff94f0ef0415d9a1b30eb13939841294ca74ea9b9965972437437ea1bed3307d73e8f5f6261198d58c9d78592513df466",
        "sealedMetadata":
            "808182838485868788898a8b8c8d8e8f90919293949596976f40c5c27ffddb37d410d1649b54433a9cc9dfe9cd6fb10698be5f2c8eb63b33a0b2dbf5b38396fb8fe30e35873beb5efb92c4606e2f444b568ed70623212024557c3ac821c6758f36217bada7b0e9923d5b97a32ff695f43c049ce25e59dc585cea7cf545f196ad3d9a43",
        "secret": "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c76fedae815cab46e936d859e2cfb99bbc07a2ab2c2aeacb",
    ]

    /// The metadata as it travels (an archive, an envelope): under the item key `c8…e7` with item
    /// ad(1), its nonce the key wrap's, `98…af`.
    static let travellingMetadata =
        "98999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafbdb27e4030faa015e7c03cc77345e795535d8ecb68c377a82b61a4f366675c62fe9190f5e33d32b9cfb800f42aff7a33cee2004d7d85f08226baf50855fba2ace86783416d198c56754348cca31247e1cb100f18a2fb0555a04c44c2169e65d11aae3b36e066502fc7f16b"

    /// Format 2's metadata of the same item: under the item key `c8…e7`, with the item ad of
    /// Protocol/store.md; its wrapped key and secret are format 3's.
    static let formatTwoMetadata =
        "808182838485868788898a8b8c8d8e8f90919293949596972917419e097acb7a4f2b3801e0e52ca726bd74b0cd4976fe439294127969f4bcd118c06efaa83f4a881bd8776ff1b2405da0e2dfb59426e169516721baf5061f61ae33c6e46d0ebb6a36d64d764ba4dfe62fe5a51a8ef85be9a87a5a489c05c2d703877ff2b6ae6609d20d"

    /// Format 1's ciphertexts of the same item: the metadata under the metadata key `60…7f`, the
    /// secret under a row key wrapped by the class key (Protocol/store.md, "Format 1").
    static let formatOne: [String: String] = [
        "sealedMetadata":
            "808182838485868788898a8b8c8d8e8f90919293949596976f40c5c27ffddb37d410d1649b54433a9cc9dfe9cd6fb10698be5f2c8eb63b33a0b2dbf5b38396fb8fe30e35873beb5efb92c4606e2f444b568ed70623212024557c3ac821c6758f36217bada7b0e9923d5b97a32ff695f43c049cc848a28cef51e4abc5cd64576ca72611",
        "secret":
            "98999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeaff94f0ef0415d9a1b30eb13939841294ca74ea9b9965972437437ea1bed3307d781e0c3792b1075b41a411f07eb7045b1b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c76fedae815cab465d2ca898ae77ebde00e6cb9d8e17cb25",
    ]
}
