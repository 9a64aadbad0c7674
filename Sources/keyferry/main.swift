print("keyferry")
