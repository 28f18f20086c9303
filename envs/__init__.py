"""rankgym.envs"""
