"""A scripted terminal login, as an agent's ``login`` command would run: it needs a terminal, prints a URL, asks
for a name (``input``: echoed) and for the code shown at the URL (``getpass``: echo off), checks the code and
writes the credentials file the login agent (login_agent.py) accepts.

It writes what real logins write too: colours, a window title, an OSC 8 hyperlink around the URL, a line redrawn
with a carriage return, and one right-to-left override character (the view must spell it out).

Environment: ``LOGIN_AGENT_CREDENTIALS`` (the file to write), ``LOGIN_AGENT_MODE`` (must be "terminal": the
auth method's env, proving the client applied it), ``LOGIN_AGENT_CODE`` (the code to expect, "4321" by default),
``LOGIN_AGENT_CHILD_PID_FILE`` (optional: start a child that sleeps for an hour and write its pid there, so a
test can see Cancel end the login's whole process group). Exit status: 0 logged in, 1 a wrong code, 2 no
terminal, 3 not started as the terminal login.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

URL = "https://login.example/device?user_code=WXYZ-0042"


def main() -> int:
    if os.environ.get("LOGIN_AGENT_MODE") != "terminal":
        print("not started as the terminal login (LOGIN_AGENT_MODE is not 'terminal')")
        return 3
    if not os.isatty(0):
        print("this login needs a terminal")
        return 2
    credentials = Path(os.environ["LOGIN_AGENT_CREDENTIALS"])
    pid_file = os.environ.get("LOGIN_AGENT_CHILD_PID_FILE")
    if pid_file:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        Path(pid_file).write_text(str(child.pid))
    sys.stdout.write("\x1b]0;Login agent\x07\x1b[1;32mWelcome to the login agent\x1b[0m \u202e!\n")
    sys.stdout.write("checking 1/2\rchecking 2/2\n")
    sys.stdout.write(f"Open \x1b]8;;{URL}\x1b\\{URL}\x1b]8;;\x1b\\ and sign in.\n")
    sys.stdout.flush()
    name = input("Your name: ")
    code = getpass.getpass("Code shown after you sign in: ")
    if code.strip() != os.environ.get("LOGIN_AGENT_CODE", "4321"):
        print("That code is not right.")
        return 1
    credentials.write_text(json.dumps({"name": name}))
    print(f"Logged in as {name}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
