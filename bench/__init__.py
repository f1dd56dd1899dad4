"""Benchmarks of the capacity broker against the capacity emulator (``make bench``)."""
