"""Example third-party rankgym env package: ``example/Reverse-v0``."""
