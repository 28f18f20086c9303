"""rankgym.judges"""
