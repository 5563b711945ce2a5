"""The command line: `python starter.py --help` lists what it does.

A thin entry point kept where the users asked for it; the commands are
`hitl.cli` (demo, chat, start, approve, inbox, serve, tools, ...).
"""

from hitl.cli import command_line

if __name__ == "__main__":
    command_line()
