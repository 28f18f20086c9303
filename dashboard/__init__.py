"""rankgym.dashboard"""
