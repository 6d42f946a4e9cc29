"""Fault injection into a running registry (and, for a dropped connection, the gateway).

One module per fault; each module's docstring states the guarantee it checks.
"""
