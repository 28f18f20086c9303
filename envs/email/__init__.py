"""rankgym.envs.email"""
