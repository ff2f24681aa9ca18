"""The notebook's views of sessions and turns, and the saved forms that outlive the kernel.

- ``panel``: SessionPanel, a session's header and one control per config option;
- ``chat``: TurnView, what a ``%%acp`` cell shows while its turn runs;
- ``permission``: permission requests as buttons (PermissionPrompt, PermissionAsker);
- ``forms``: the agent's forms (elicitation) drawn from their schema (FormPrompt, FormAsker);
- ``comms``: widget changes acknowledged while a ``%%acp`` cell awaits, so each one reaches the kernel;
- ``sessions``: SessionTable, what ``%acp sessions`` lists;
- ``inspector``: the protocol inspector;
- ``display``: LiveDisplay, an output with a display id kept current and made static at the end;
- ``render_thread``: the one thread views draw and publish on (off the protocol loop), and Throttle;
- ``static``, ``labels``, ``_html``: the saved forms, the words and the HTML fragments they share.

Agent state reaches the views on the background loop thread (observers); clicks arrive on the
kernel thread; views draw and publish on the render thread, so a slow view never holds up an
agent's frames. Each view guards its widgets with its own lock and says in its docstring which
thread writes what.
"""
