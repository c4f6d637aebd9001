"""Errors meant for users: one line saying what is wrong and how to fix it.

The CLI prints them without a traceback (as click errors); internal errors keep theirs.
"""


class UsageError(Exception):
    pass
