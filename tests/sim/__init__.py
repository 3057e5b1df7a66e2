"""Crash and corruption simulation for the store (used by tests/store and bench/reliability.py):
a recording file system, the disk images a crash could leave, workloads, and the checker.
Imports nothing of models or torch, so thousands of images recover in seconds."""
