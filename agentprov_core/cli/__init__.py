"""The command line: parse, call the stage that does the work, render its answer.

May import: every stage; nothing imports it but ``__main__`` and ``testing``.
"""
