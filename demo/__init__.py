"""`make run`: the broker's story against a local emulator, step by step."""
