"""rankgym.trainer"""
