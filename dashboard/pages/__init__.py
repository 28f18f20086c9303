"""rankgym.dashboard.pages"""
